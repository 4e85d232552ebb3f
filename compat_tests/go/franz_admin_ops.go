package main

// kadm operations beyond topics and configs: client quotas, log dirs, DescribeProducers,
// DescribeTransactions/ListTransactions (scenario "admin_ops") and partition reassignments on
// a cluster (scenario "reassign").

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	franzScenarios["admin_ops"] = franzAdminOps
	franzScenarios["reassign"] = franzReassign
}

func quotaValues(ctx context.Context, adm *kadm.Client, user string) (map[string]float64, error) {
	described, err := adm.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{
		{Type: "user", MatchName: &user, MatchType: 0},
	})
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, d := range described {
		parts := []string{}
		for _, c := range d.Entity {
			parts = append(parts, c.String())
		}
		sort.Strings(parts)
		key := strings.Join(parts, ";") + ";"
		for _, v := range d.Values {
			out[key+v.Key] = v.Value
		}
	}
	return out, nil
}

// quotaValuesWhen polls DescribeClientQuotas until `user` has `n` quota values: Kafka's
// brokers apply an altered quota when the controller's record reaches their metadata image,
// after AlterClientQuotas has answered.
func quotaValuesWhen(ctx context.Context, adm *kadm.Client, user string, n int) (map[string]float64, error) {
	for {
		got, err := quotaValues(ctx, adm, user)
		if err != nil || len(got) == n || ctx.Err() != nil {
			return got, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// finalizedLevel: a feature's finalized max level as ApiVersions reports it (0 when absent).
func finalizedLevel(ctx context.Context, cl *kgo.Client, feature string) (int16, error) {
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName, req.ClientSoftwareVersion = "odradek-compat", "1"
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, err
	}
	for _, f := range resp.FinalizedFeatures {
		if f.Name == feature {
			return f.MaxVersionLevel, nil
		}
	}
	return 0, nil
}

func alterQuotas(ctx context.Context, adm *kadm.Client, entries []kadm.AlterClientQuotaEntry) (string, error) {
	altered, err := adm.AlterClientQuotas(ctx, entries)
	if err != nil {
		return "", err
	}
	for _, a := range altered {
		if a.Err != nil {
			return errName(a.Err), nil
		}
	}
	return "", nil
}

// franzAdminOps: quotas set, described and removed; log dirs described and a move to an
// unknown dir; an open transaction seen by DescribeProducers, DescribeTransactions and
// ListTransactions, then committed.
func franzAdminOps(spec *Spec) (any, error) {
	ctx, cl, adm, done, err := franzSetup(spec)
	if err != nil {
		return nil, err
	}
	defer done()
	out := map[string]any{}

	user, client := spec.Topic+"-user", spec.Topic+"-client"
	userOnly := kadm.ClientQuotaEntity{{Type: "user", Name: &user}}
	userClient := kadm.ClientQuotaEntity{{Type: "user", Name: &user}, {Type: "client-id", Name: &client}}
	if out["quota_alter"], err = alterQuotas(ctx, adm, []kadm.AlterClientQuotaEntry{
		{Entity: userOnly, Ops: []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Value: 2048}}},
		{Entity: userClient, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1024}}},
	}); err != nil {
		return nil, err
	}
	if out["quotas"], err = quotaValuesWhen(ctx, adm, user, 2); err != nil {
		return nil, err
	}
	if out["quota_remove"], err = alterQuotas(ctx, adm, []kadm.AlterClientQuotaEntry{
		{Entity: userClient, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Remove: true}}},
	}); err != nil {
		return nil, err
	}
	if out["quotas_after"], err = quotaValuesWhen(ctx, adm, user, 1); err != nil {
		return nil, err
	}
	if out["quota_bad_key"], err = alterQuotas(ctx, adm, []kadm.AlterClientQuotaEntry{
		{Entity: userOnly, Ops: []kadm.AlterClientQuotaOp{{Key: "no_such_quota", Value: 1}}},
	}); err != nil {
		return nil, err
	}

	if err := createTopic(ctx, adm, spec.Topic, int32(spec.Partitions), nil); err != nil {
		return nil, err
	}
	if err := waitReady(ctx, adm, spec.Topic, spec.Partitions); err != nil {
		return nil, err
	}
	txn, err := newFranz(spec, kgo.TransactionalID(spec.TxnID), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return nil, err
	}
	defer txn.Close()
	out["transaction_version"], err = finalizedLevel(ctx, cl, "transaction.version")
	if err != nil {
		return nil, err
	}
	// kgo opts in to KIP-890 part 2 at BeginTransaction only if it already holds a broker's
	// ApiVersions (finalized features): a client that has sent nothing yet runs its first
	// transaction on version 1 whatever the cluster finalized
	if err := txn.Ping(ctx); err != nil {
		return nil, err
	}
	if err := txn.BeginTransaction(); err != nil {
		return nil, err
	}
	recs := franzRecords(spec.Topic, "ops", 0, spec.Count, spec.Partitions, spec.BaseTS)
	if err := txn.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return nil, fmt.Errorf("produce in transaction: %w", err)
	}
	producers := func() ([]map[string]int64, error) {
		described, err := adm.DescribeProducers(ctx, kadm.TopicsSet{spec.Topic: nil})
		if err != nil {
			return nil, err
		}
		got := []map[string]int64{}
		var perr error
		described.EachPartition(func(p kadm.DescribedProducersPartition) {
			if p.Err != nil {
				perr = fmt.Errorf("describe producers %s[%d]: %w", p.Topic, p.Partition, p.Err)
			}
			for _, b := range p.ActiveProducers {
				got = append(got, map[string]int64{"p": int64(p.Partition), "pid": b.ProducerID,
					"epoch": int64(b.ProducerEpoch), "last_seq": int64(b.LastSequence),
					"txn_start": b.CurrentTxnStartOffset})
			}
		})
		sort.Slice(got, func(i, j int) bool { return got[i]["p"] < got[j]["p"] })
		return got, perr
	}
	describeTxn := func() (map[string]any, error) {
		described, err := adm.DescribeTransactions(ctx, spec.TxnID)
		if err != nil {
			return nil, err
		}
		d, ok := described[spec.TxnID]
		if !ok {
			return nil, fmt.Errorf("transaction %s not described", spec.TxnID)
		}
		parts := []int32{}
		for p := range d.Topics[spec.Topic] {
			parts = append(parts, p)
		}
		sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
		return map[string]any{"state": d.State, "pid": d.ProducerID, "timeout_ms": d.TimeoutMillis,
			"partitions": parts, "err": errName(d.Err)}, nil
	}
	if out["producers_open"], err = producers(); err != nil {
		return nil, err
	}
	if out["txn_open"], err = describeTxn(); err != nil {
		return nil, err
	}
	listed, err := adm.ListTransactions(ctx, nil, []string{"Ongoing"})
	if err != nil {
		return nil, err
	}
	_, out["listed_ongoing"] = listed[spec.TxnID]
	if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	// The coordinator answers the commit once PrepareCommit is written; the markers follow.
	for {
		d, err := describeTxn()
		if err != nil {
			return nil, err
		}
		out["txn_committed"] = d
		if d["state"] == "CompleteCommit" || ctx.Err() != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if out["producers_committed"], err = producers(); err != nil {
		return nil, err
	}
	listed, err = adm.ListTransactions(ctx, nil, []string{"Ongoing"})
	if err != nil {
		return nil, err
	}
	_, out["listed_ongoing_after"] = listed[spec.TxnID]

	all := kadm.TopicsSet{}
	for p := 0; p < spec.Partitions; p++ {
		all.Add(spec.Topic, int32(p))
	}
	dirs, err := adm.DescribeAllLogDirs(ctx, all)
	if err != nil {
		return nil, err
	}
	nDirs, sizes := 0, map[int32]int64{}
	dirs.Each(func(d kadm.DescribedLogDir) {
		if d.Err == nil {
			nDirs++
		}
		d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
			if p.Topic == spec.Topic {
				sizes[p.Partition] = p.Size
			}
		})
	})
	out["log_dirs"], out["log_dir_sizes"] = nDirs, sizes
	var move kadm.AlterReplicaLogDirsReq
	move.Add("/no/such/log/dir", kadm.TopicsSet{spec.Topic: {0: struct{}{}}})
	moved, err := adm.AlterAllReplicaLogDirs(ctx, move)
	if err != nil {
		return nil, err
	}
	moveErr := "no response"
	moved.Each(func(r kadm.AlterReplicaLogDirsResponse) { moveErr = errName(r.Err) })
	out["move_unknown_dir"] = moveErr
	return out, nil
}

// franzReassign: a topic with replication factor 2 on a three-broker cluster, one
// partition's replicas moved to the broker that had none plus one of the old ones; waits for
// ListPartitionReassignments to be empty and reads every record back.
func franzReassign(spec *Spec) (any, error) {
	ctx, _, adm, done, err := franzSetup(spec)
	if err != nil {
		return nil, err
	}
	defer done()
	brokers, err := adm.ListBrokers(ctx)
	if err != nil {
		return nil, err
	}
	resp, err := adm.CreateTopic(ctx, 1, 2, nil, spec.Topic)
	if err != nil || resp.Err != nil {
		return nil, fmt.Errorf("create %s: %v %v", spec.Topic, err, resp.Err)
	}
	if err := waitReady(ctx, adm, spec.Topic, 1); err != nil {
		return nil, err
	}
	prod, err := newFranz(spec, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return nil, err
	}
	recs := franzRecords(spec.Topic, "move", 0, spec.Count, 1, spec.BaseTS)
	err = prod.ProduceSync(ctx, recs...).FirstErr()
	prod.Close()
	if err != nil {
		return nil, err
	}
	replicasNow := func() ([]int32, []int32, error) {
		md, err := adm.Metadata(ctx, spec.Topic)
		if err != nil {
			return nil, nil, err
		}
		p := md.Topics[spec.Topic].Partitions[0]
		r, isr := append([]int32{}, p.Replicas...), append([]int32{}, p.ISR...)
		sort.Slice(r, func(i, j int) bool { return r[i] < r[j] })
		sort.Slice(isr, func(i, j int) bool { return isr[i] < isr[j] })
		return r, isr, nil
	}
	before, _, err := replicasNow()
	if err != nil {
		return nil, err
	}
	target := []int32{}
	for _, b := range brokers.NodeIDs() {
		if b != before[0] && b != before[1] {
			target = append(target, b)
		}
	}
	target = append(target, before[0])
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(spec.Topic, 0, target)
	altered, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		return nil, err
	}
	want := append([]int32{}, target...)
	sort.Slice(want, func(i, j int) bool { return want[i] < want[j] })
	out := map[string]any{"brokers": len(brokers), "before": before, "target": target, "alter": ""}
	altered.Each(func(r kadm.AlterPartitionAssignmentsResponse) {
		if r.Err != nil {
			out["alter"] = errName(r.Err)
		}
	})
	for {
		listed, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{spec.Topic: {0: struct{}{}}})
		if err != nil {
			return nil, err
		}
		r, isr, err := replicasNow()
		if err != nil {
			return nil, err
		}
		if len(listed) == 0 && fmt.Sprint(r) == fmt.Sprint(want) && fmt.Sprint(isr) == fmt.Sprint(want) {
			out["after"], out["isr_after"] = r, isr
			break
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("reassignment of %s not done (%v, replicas %v isr %v)", spec.Topic, listed, r, isr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if out["records"], err = consumeAll(ctx, spec, spec.Topic, spec.Count); err != nil {
		return nil, err
	}
	return out, nil
}
