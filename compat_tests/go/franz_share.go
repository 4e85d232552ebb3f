package main

// franz-go share group consumption (KIP-932): kgo.ShareGroup, Record.Ack, kadm.DescribeShareGroups.

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// setGroupConfig sets one dynamic group config (IncrementalAlterConfigs, resource type GROUP).
func setGroupConfig(ctx context.Context, cl *kgo.Client, group, key, value string) error {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType = kmsg.ConfigResourceTypeGroupConfig
	res.ResourceName = group
	cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	cfg.Name, cfg.Value = key, kmsg.StringPtr(value)
	res.Configs = append(res.Configs, cfg)
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	for _, r := range resp.Resources {
		if r.ErrorCode != 0 {
			return fmt.Errorf("alter group config %s: error %d", key, r.ErrorCode)
		}
	}
	return nil
}

type shareMember struct {
	name     string
	cl       *kgo.Client
	mu       sync.Mutex
	accepted []Rec
	released []Rec
	redeliv  []int32 // delivery counts of records seen more than once
}

// franzShare: `count` records written before two members of a share group join (with
// share.auto.offset.reset=earliest); member a releases the first record it gets, every other
// record is accepted. Reports what each member accepted and the group as described.
func franzShare(spec *Spec) (any, error) {
	ctx, admCl, adm, done, err := franzSetup(spec)
	if err != nil {
		return nil, err
	}
	defer done()
	if err := createTopic(ctx, adm, spec.Topic, int32(spec.Partitions), nil); err != nil {
		return nil, err
	}
	if err := waitReady(ctx, adm, spec.Topic, spec.Partitions); err != nil {
		return nil, err
	}
	prod, err := newFranz(spec, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return nil, err
	}
	recs := franzRecords(spec.Topic, "share", 0, spec.Count, spec.Partitions, spec.BaseTS)
	err = prod.ProduceSync(ctx, recs...).FirstErr()
	prod.Close()
	if err != nil {
		return nil, fmt.Errorf("produce: %w", err)
	}
	if err := setGroupConfig(ctx, admCl, spec.Group, "share.auto.offset.reset", "earliest"); err != nil {
		return nil, err
	}
	// A member's client joins and fetches (acquiring records) as soon as it exists, whether
	// or not the program polls it: b is created only once a has released its record.
	join := func(name string) (*shareMember, error) {
		m := &shareMember{name: name, accepted: []Rec{}, released: []Rec{}, redeliv: []int32{}}
		m.cl, err = newFranz(spec, kgo.ShareGroup(spec.Group), kgo.ConsumeTopics(spec.Topic),
			kgo.FetchMaxWait(500*time.Millisecond))
		return m, err
	}
	seen := map[[2]int64]bool{}
	var seenMu sync.Mutex
	accepted := func() int {
		seenMu.Lock()
		defer seenMu.Unlock()
		return len(seen)
	}
	// poll: one poll of m; the first record a member ever gets is released when `release`.
	poll := func(m *shareMember, release bool) error {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		fs := m.cl.PollRecords(pctx, 100)
		pcancel()
		if ctx.Err() != nil {
			return fmt.Errorf("member %s: %d of %d records accepted: %w", m.name, accepted(), spec.Count, ctx.Err())
		}
		for _, fe := range fs.Errors() {
			if fe.Err != context.DeadlineExceeded && fe.Err != context.Canceled {
				return fmt.Errorf("member %s: %s[%d]: %w", m.name, fe.Topic, fe.Partition, fe.Err)
			}
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		fs.EachRecord(func(r *kgo.Record) {
			if r.DeliveryCount() > 1 {
				m.redeliv = append(m.redeliv, r.DeliveryCount())
			}
			if release && len(m.released) == 0 {
				r.Ack(kgo.AckRelease)
				m.released = append(m.released, franzRec(r))
				return
			}
			r.Ack(kgo.AckAccept)
			m.accepted = append(m.accepted, franzRec(r))
			seenMu.Lock()
			seen[[2]int64{int64(r.Partition), r.Offset}] = true
			seenMu.Unlock()
		})
		return m.cl.FlushAcks(ctx)
	}
	// Member a alone until it has released one record; then a and b together until every
	// record was accepted (the released one included, by whichever member it reached).
	a, err := join("a")
	if err != nil {
		return nil, err
	}
	defer a.cl.Close()
	for len(a.released) == 0 {
		if err := poll(a, true); err != nil {
			return nil, err
		}
	}
	b, err := join("b")
	if err != nil {
		return nil, err
	}
	defer b.cl.Close()
	members := []*shareMember{a, b}
	var wg sync.WaitGroup
	errs := make(chan error, len(members))
	for _, m := range members {
		wg.Add(1)
		go func(m *shareMember) {
			defer wg.Done()
			for accepted() < spec.Count {
				if err := poll(m, false); err != nil {
					errs <- err
					return
				}
			}
		}(m)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return nil, err
	}
	out := map[string]any{}
	described, err := adm.DescribeShareGroups(ctx, spec.Group)
	if err != nil {
		return nil, err
	}
	d := described[spec.Group]
	out["described_err"] = errName(d.Err)
	out["state"] = d.GroupState
	out["members"] = len(d.Members)
	for _, m := range members {
		out[m.name+"_accepted"] = m.accepted
		out[m.name+"_released"] = m.released
		out[m.name+"_redelivered"] = m.redeliv
	}
	listed, err := adm.ListGroupsByType(ctx, []string{"share"})
	if err != nil {
		return nil, err
	}
	_, out["listed_as_share"] = listed[spec.Group]
	return out, nil
}
