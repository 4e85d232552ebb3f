package main

// franz-go (kgo, kadm) scenarios.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

var franzScenarios = map[string]func(*Spec) (any, error){
	"produce": franzProduce,
	"txn":     franzTxn,
	"group":   franzGroup,
	"admin":   franzAdmin,
	"acl":     franzACL,
	"share":   franzShare,
}

func errName(err error) string {
	if err == nil {
		return ""
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message
	}
	return err.Error()
}

// franzOpts: the seed brokers, TLS trusting spec.CAFile when given, and `extra`.
func franzOpts(spec *Spec, extra ...kgo.Opt) []kgo.Opt {
	opts := []kgo.Opt{kgo.SeedBrokers(spec.Brokers...), kgo.RetryTimeout(20 * time.Second)}
	if spec.CAFile != "" {
		tc, err := tlsConfig(spec.CAFile)
		if err != nil {
			fail(err)
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	if os.Getenv("ODRADEK_KGO_DEBUG") != "" {
		opts = append(opts, kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelDebug, nil)))
	}
	return append(opts, extra...)
}

func franzSASL(mechanism, user, password string) kgo.Opt {
	switch mechanism {
	case "SCRAM-SHA-256":
		return kgo.SASL(scram.Auth{User: user, Pass: password}.AsSha256Mechanism())
	case "SCRAM-SHA-512":
		return kgo.SASL(scram.Auth{User: user, Pass: password}.AsSha512Mechanism())
	case "OAUTHBEARER":
		return kgo.SASL(oauth.Auth{Token: unsecuredJWS(user)}.AsMechanism())
	default:
		return kgo.SASL(plain.Auth{User: user, Pass: password}.AsMechanism())
	}
}

// unsecuredJWS is an unsigned token ({"alg":"none"}) for `principal` as Kafka's unsecured
// OAUTHBEARER login module makes one: sub, iat (whole milliseconds, in seconds) and exp.
func unsecuredJWS(principal string) string {
	enc := func(v any) string {
		raw, err := json.Marshal(v)
		if err != nil {
			fail(err)
		}
		return base64.RawURLEncoding.EncodeToString(raw)
	}
	now := float64(time.Now().UnixMilli()) / 1000
	claims := map[string]any{"sub": principal, "iat": now, "exp": now + 3600}
	return enc(map[string]string{"alg": "none"}) + "." + enc(claims) + "."
}

func tlsConfig(caFile string) (*tls.Config, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no certificate in %s", caFile)
	}
	return &tls.Config{RootCAs: pool, ServerName: "localhost", MinVersion: tls.VersionTLS12}, nil
}

func newFranz(spec *Spec, extra ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(franzOpts(spec, extra...)...)
}

// replicas is the replication factor of the topics scenarios create (spec.Replicas, default 1).
var replicas int16 = 1

func createTopic(ctx context.Context, adm *kadm.Client, topic string, partitions int32, configs map[string]*string) error {
	resp, err := adm.CreateTopic(ctx, partitions, replicas, configs, topic)
	if err != nil {
		return err
	}
	if resp.Err != nil && !errors.Is(resp.Err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("create %s: %w", topic, resp.Err)
	}
	return nil
}

// waitReady polls ListOffsets until every partition of `topic` answers without an error: a
// new topic's leaders may not serve yet, and an acks=0 record sent before then is lost.
func waitReady(ctx context.Context, adm *kadm.Client, topic string, partitions int) error {
	for {
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err == nil {
			ok := 0
			ends.Each(func(o kadm.ListedOffset) {
				if o.Err == nil {
					ok++
				}
			})
			if ok == partitions {
				return nil
			}
		}
		if ctx.Err() != nil {
			return fmt.Errorf("topic %s not ready: %w", topic, ctx.Err())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func codecOpt(codec string) kgo.CompressionCodec {
	switch codec {
	case "gzip":
		return kgo.GzipCompression()
	case "snappy":
		return kgo.SnappyCompression()
	case "lz4":
		return kgo.Lz4Compression()
	case "zstd":
		return kgo.ZstdCompression()
	}
	return kgo.NoCompression()
}

func acksOpts(acks string) []kgo.Opt {
	switch acks {
	case "0":
		return []kgo.Opt{kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite()}
	case "1":
		return []kgo.Opt{kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite()}
	}
	return []kgo.Opt{kgo.RequiredAcks(kgo.AllISRAcks())} // idempotent: kgo's default
}

func franzRecord(topic, tag string, i, partitions int, baseTS int64) *kgo.Record {
	r := &kgo.Record{
		Topic:     topic,
		Partition: int32(i % partitions),
		Key:       recordKey(i),
		Value:     recordValue(tag, i),
		Timestamp: time.UnixMilli(baseTS + 10*int64(i)),
	}
	for _, h := range recordHeaders(i) {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: string(h[0]), Value: h[1]})
	}
	return r
}

func franzRec(r *kgo.Record) Rec {
	out := Rec{Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp.UnixMilli(),
		Key: hexOrNil(r.Key), Value: fmt.Sprintf("%x", r.Value), Headers: [][2]string{}}
	for _, h := range r.Headers {
		out.Headers = append(out.Headers, [2]string{h.Key, fmt.Sprintf("%x", h.Value)})
	}
	return out
}

// consumeAll reads `topic` from the start with no group until `want` records arrived.
func consumeAll(ctx context.Context, spec *Spec, topic string, want int, extra ...kgo.Opt) ([]Rec, error) {
	opts := append([]kgo.Opt{kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, extra...)
	cl, err := newFranz(spec, opts...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var out []Rec
	for len(out) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return out, fmt.Errorf("consumed %d of %d records of %s: %w", len(out), want, topic, ctx.Err())
		}
		if errs := fs.Errors(); len(errs) > 0 {
			return out, fmt.Errorf("fetch %s: %v", topic, errs[0].Err)
		}
		fs.EachRecord(func(r *kgo.Record) { out = append(out, franzRec(r)) })
	}
	return out, nil
}

type produceCase struct {
	Codec   string             `json:"codec"`
	Acks    string             `json:"acks"`
	Topic   string             `json:"topic"`
	Sent    [][2]int64         `json:"sent"`
	Records []Rec              `json:"records"`
	ByTime  map[string][]int64 `json:"by_time"`
	Start   map[int32]int64    `json:"start"`
	End     map[int32]int64    `json:"end"`
	Error   string             `json:"error,omitempty"`
}

// franzProduce: per case, a topic of `partitions` written with the case's codec and acks,
// read back from the start, and ListOffsets at the start, end and a timestamp.
func franzProduce(spec *Spec) (any, error) {
	ctx, _, adm, done, err := franzSetup(spec)
	if err != nil {
		return nil, err
	}
	defer done()
	var results []produceCase
	for _, c := range spec.Cases {
		res := produceCase{Codec: c.Codec, Acks: c.Acks, Topic: c.Topic, ByTime: map[string][]int64{}}
		if err := createTopic(ctx, adm, c.Topic, int32(spec.Partitions), nil); err != nil {
			return nil, err
		}
		if err := waitReady(ctx, adm, c.Topic, spec.Partitions); err != nil {
			return nil, err
		}
		opts := append(acksOpts(c.Acks), kgo.ProducerBatchCompression(codecOpt(c.Codec)),
			kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
		prod, err := newFranz(spec, opts...)
		if err != nil {
			return nil, err
		}
		recs := franzRecords(c.Topic, c.Codec+"-"+c.Acks, 0, spec.Count, spec.Partitions, spec.BaseTS)
		results_ := prod.ProduceSync(ctx, recs...)
		prod.Close()
		if err := results_.FirstErr(); err != nil {
			res.Error = errName(err)
			results = append(results, res)
			continue
		}
		for _, r := range results_ {
			res.Sent = append(res.Sent, [2]int64{int64(r.Record.Partition), r.Record.Offset})
		}
		res.Records, err = consumeAll(ctx, spec, c.Topic, spec.Count)
		if err != nil {
			res.Error = err.Error()
		}
		starts, err := adm.ListStartOffsets(ctx, c.Topic)
		if err != nil {
			return nil, err
		}
		ends, err := adm.ListEndOffsets(ctx, c.Topic)
		if err != nil {
			return nil, err
		}
		res.Start, res.End = map[int32]int64{}, map[int32]int64{}
		starts.Each(func(o kadm.ListedOffset) { res.Start[o.Partition] = o.Offset })
		ends.Each(func(o kadm.ListedOffset) { res.End[o.Partition] = o.Offset })
		for _, i := range []int{0, spec.Count / 2, spec.Count + 5} {
			ts := spec.BaseTS + 10*int64(i)
			lo, err := adm.ListOffsetsAfterMilli(ctx, ts, c.Topic)
			if err != nil {
				return nil, err
			}
			offs := make([]int64, spec.Partitions)
			lo.Each(func(o kadm.ListedOffset) { offs[o.Partition] = o.Offset })
			res.ByTime[fmt.Sprint(i)] = offs
		}
		results = append(results, res)
		logf("case %s/%s done", c.Codec, c.Acks)
	}
	return map[string]any{"cases": results}, nil
}

// franzTxn: consume-transform-produce through a GroupTransactSession (read_committed), after
// an aborted transaction on the output topic; then a read_committed reader of the output.
func franzTxn(spec *Spec) (any, error) {
	ctx, _, adm, done, err := franzSetup(spec)
	if err != nil {
		return nil, err
	}
	defer done()
	for _, t := range []string{spec.Topic, spec.Output} {
		if err := createTopic(ctx, adm, t, int32(spec.Partitions), nil); err != nil {
			return nil, err
		}
	}
	// input: plain idempotent producer
	prod, err := newFranz(spec, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return nil, err
	}
	recs := franzRecords(spec.Topic, "in", 0, spec.Count, spec.Partitions, spec.BaseTS)
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return nil, fmt.Errorf("produce input: %w", err)
	}
	prod.Close()

	// an aborted transaction on the output topic, on every partition
	ab, err := newFranz(spec, kgo.TransactionalID(spec.TxnID+"-abort"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return nil, err
	}
	if err := ab.BeginTransaction(); err != nil {
		return nil, err
	}
	for p := 0; p < spec.Partitions; p++ {
		r := &kgo.Record{Topic: spec.Output, Partition: int32(p), Value: []byte(fmt.Sprintf("aborted-%d", p))}
		if err := ab.ProduceSync(ctx, r).FirstErr(); err != nil {
			return nil, fmt.Errorf("produce aborted: %w", err)
		}
	}
	if err := ab.EndTransaction(ctx, kgo.TryAbort); err != nil {
		return nil, fmt.Errorf("abort: %w", err)
	}
	ab.Close()

	sess, err := kgo.NewGroupTransactSession(franzOpts(spec,
		kgo.TransactionalID(spec.TxnID), kgo.ConsumerGroup(spec.Group), kgo.ConsumeTopics(spec.Topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.RequireStableFetchOffsets(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		return nil, err
	}
	transformed, txns := 0, 0
	for transformed < spec.Count {
		fs := sess.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("transformed %d of %d: %w", transformed, spec.Count, ctx.Err())
		}
		if errs := fs.Errors(); len(errs) > 0 {
			return nil, fmt.Errorf("session fetch: %v", errs[0].Err)
		}
		if fs.NumRecords() == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			return nil, fmt.Errorf("begin: %w", err)
		}
		var out []*kgo.Record
		fs.EachRecord(func(r *kgo.Record) {
			out = append(out, &kgo.Record{Topic: spec.Output, Partition: r.Partition, Key: r.Key,
				Value: append([]byte("T:"), r.Value...)})
		})
		if err := sess.ProduceSync(ctx, out...).FirstErr(); err != nil {
			return nil, fmt.Errorf("produce output: %w", err)
		}
		committed, err := sess.End(ctx, kgo.TryCommit)
		if err != nil {
			return nil, fmt.Errorf("end: %w", err)
		}
		if committed {
			transformed += len(out)
			txns++
		}
	}
	sess.Close()

	committedRecs, err := consumeAll(ctx, spec, spec.Output, spec.Count, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		return nil, err
	}
	// everything, aborted records included, for a read_uncommitted reader
	allRecs, err := consumeAll(ctx, spec, spec.Output, spec.Count+spec.Partitions)
	if err != nil {
		return nil, err
	}
	offsets, err := adm.FetchOffsets(ctx, spec.Group)
	if err != nil {
		return nil, err
	}
	groupOffsets := map[int32]int64{}
	offsets.Each(func(o kadm.OffsetResponse) { groupOffsets[o.Partition] = o.At })
	return map[string]any{"transactions": txns, "committed": committedRecs, "uncommitted": allRecs,
		"group_offsets": groupOffsets}, nil
}

type member struct {
	name     string
	cl       *kgo.Client
	mu       sync.Mutex
	assigned map[int32]bool
	seen     map[string]int
}

func (m *member) owned() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []int32
	for p, ok := range m.assigned {
		if ok {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// franzGroup: two members of one group (classic with the named balancer, or KIP-848 with
// the broker assigning). The first reads the first half; the second joins; once the
// partitions are split between them the second half is written; together they must see
// every record.
func franzGroup(spec *Spec) (any, error) {
	ctx, _, adm, done, err := franzSetup(spec)
	if err != nil {
		return nil, err
	}
	defer done()
	if err := createTopic(ctx, adm, spec.Topic, int32(spec.Partitions), nil); err != nil {
		return nil, err
	}
	prod, err := newFranz(spec, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return nil, err
	}
	defer prod.Close()
	produceRange := func(from, to int) error {
		recs := franzRecords(spec.Topic, "g", from, to, spec.Partitions, spec.BaseTS)
		return prod.ProduceSync(ctx, recs...).FirstErr()
	}
	half := spec.Count / 2
	if err := produceRange(0, half); err != nil {
		return nil, err
	}
	var balancer kgo.GroupBalancer
	switch spec.Balancer {
	case "range":
		balancer = kgo.RangeBalancer()
	case "roundrobin":
		balancer = kgo.RoundRobinBalancer()
	case "sticky":
		balancer = kgo.StickyBalancer()
	default:
		balancer = kgo.CooperativeStickyBalancer()
	}
	newMember := func(name string) (*member, error) {
		m := &member{name: name, assigned: map[int32]bool{}, seen: map[string]int{}}
		opts := []kgo.Opt{kgo.ConsumerGroup(spec.Group), kgo.ConsumeTopics(spec.Topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.Balancers(balancer),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
				m.mu.Lock()
				for _, p := range a[spec.Topic] {
					m.assigned[p] = true
				}
				m.mu.Unlock()
			}),
			kgo.OnPartitionsRevoked(func(_ context.Context, cl *kgo.Client, r map[string][]int32) {
				_ = cl.CommitMarkedOffsets(ctx)
				m.mu.Lock()
				for _, p := range r[spec.Topic] {
					m.assigned[p] = false
				}
				m.mu.Unlock()
			}),
			kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, r map[string][]int32) {
				m.mu.Lock()
				for _, p := range r[spec.Topic] {
					m.assigned[p] = false
				}
				m.mu.Unlock()
			}),
			kgo.AutoCommitMarks(), kgo.BlockRebalanceOnPoll()}
		if spec.Protocol == "consumer" {
			opts = append(opts, kgo.ServerSideBalancer())
		}
		cl, err := newFranz(spec, opts...)
		if err != nil {
			return nil, err
		}
		m.cl = cl
		return m, nil
	}
	union := map[string]int{}
	var umu sync.Mutex
	poll := func(m *member) error {
		pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer pcancel()
		fs := m.cl.PollFetches(pctx)
		defer m.cl.AllowRebalance()
		for _, e := range fs.Errors() {
			if !errors.Is(e.Err, context.DeadlineExceeded) {
				return fmt.Errorf("%s fetch: %w", m.name, e.Err)
			}
		}
		fs.EachRecord(func(r *kgo.Record) {
			k := fmt.Sprintf("%d-%d", r.Partition, r.Offset)
			m.mu.Lock()
			m.seen[k]++
			m.mu.Unlock()
			umu.Lock()
			union[k]++
			umu.Unlock()
			m.cl.MarkCommitRecords(r)
		})
		return nil
	}
	a, err := newMember("a")
	if err != nil {
		return nil, err
	}
	defer a.cl.Close()
	for len(union) < half {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("member a read %d of %d", len(union), half)
		}
		if err := poll(a); err != nil {
			return nil, err
		}
	}
	if err := a.cl.CommitMarkedOffsets(ctx); err != nil {
		return nil, err
	}
	b, err := newMember("b")
	if err != nil {
		return nil, err
	}
	defer b.cl.Close()
	// poll both until the partitions are split between them, each once
	for {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("no split: a owns %v, b owns %v", a.owned(), b.owned())
		}
		if err := poll(a); err != nil {
			return nil, err
		}
		if err := poll(b); err != nil {
			return nil, err
		}
		oa, ob := a.owned(), b.owned()
		if len(oa) > 0 && len(ob) > 0 && len(oa)+len(ob) == spec.Partitions {
			break
		}
	}
	if err := produceRange(half, spec.Count); err != nil {
		return nil, err
	}
	for len(union) < spec.Count {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("members read %d of %d: a owns %v read %d, b owns %v read %d",
				len(union), spec.Count, a.owned(), len(a.seen), b.owned(), len(b.seen))
		}
		if err := poll(a); err != nil {
			return nil, err
		}
		if err := poll(b); err != nil {
			return nil, err
		}
	}
	listed, err := adm.ListGroups(ctx)
	if err != nil {
		return nil, err
	}
	groupType := listed[spec.Group].GroupType
	for _, m := range []*member{a, b} {
		if err := m.cl.CommitMarkedOffsets(ctx); err != nil {
			return nil, fmt.Errorf("%s commit: %w", m.name, err)
		}
	}
	oa, ob := a.owned(), b.owned()
	offsets, err := adm.FetchOffsets(ctx, spec.Group)
	if err != nil {
		return nil, err
	}
	committed := map[int32]int64{}
	offsets.Each(func(o kadm.OffsetResponse) { committed[o.Partition] = o.At })
	dups := 0
	for _, n := range union {
		if n > 1 {
			dups++
		}
	}
	return map[string]any{"a_owns": oa, "b_owns": ob, "a_read": len(a.seen), "b_read": len(b.seen),
		"distinct": len(union), "duplicates": dups, "committed": committed, "group_type": groupType}, nil
}

// franzAdmin: kadm topics, partitions, configs and offsets.
func franzAdmin(spec *Spec) (any, error) {
	ctx, _, adm, done, err := franzSetup(spec)
	if err != nil {
		return nil, err
	}
	defer done()
	out := map[string]any{}
	retention := "3600000"
	created, err := adm.CreateTopic(ctx, 2, 1, map[string]*string{"retention.ms": &retention}, spec.Topic)
	if err != nil {
		return nil, err
	}
	out["create"] = errName(created.Err)
	dup, err := adm.CreateTopic(ctx, 2, 1, nil, spec.Topic)
	if err == nil {
		err = dup.Err
	}
	out["create_again"] = errName(err)
	details, err := adm.ListTopics(ctx, spec.Topic)
	if err != nil {
		return nil, err
	}
	out["partitions"] = len(details[spec.Topic].Partitions)
	readConfigs := func() (map[string]string, error) {
		rcs, err := adm.DescribeTopicConfigs(ctx, spec.Topic)
		if err != nil {
			return nil, err
		}
		rc, err := rcs.On(spec.Topic, nil)
		if err != nil {
			return nil, err
		}
		got := map[string]string{}
		for _, c := range rc.Configs {
			if c.Key == "retention.ms" || c.Key == "cleanup.policy" || c.Key == "max.message.bytes" {
				got[c.Key] = c.MaybeValue() + "/" + c.Source.String()
			}
		}
		return got, nil
	}
	if out["configs"], err = readConfigs(); err != nil {
		return nil, err
	}
	maxBytes := "200000"
	alter, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "max.message.bytes", Value: &maxBytes},
		{Op: kadm.DeleteConfig, Name: "retention.ms"},
	}, spec.Topic)
	if err != nil {
		return nil, err
	}
	out["alter"] = errName(alter[0].Err)
	if out["configs_after"], err = readConfigs(); err != nil {
		return nil, err
	}
	bad := "x"
	badAlter, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: &bad}}, spec.Topic)
	if err != nil {
		return nil, err
	}
	out["alter_bad"] = errName(badAlter[0].Err)
	cp, err := adm.CreatePartitions(ctx, 2, spec.Topic)
	if err != nil {
		return nil, err
	}
	out["create_partitions"] = errName(cp[spec.Topic].Err)
	details, err = adm.ListTopics(ctx, spec.Topic)
	if err != nil {
		return nil, err
	}
	out["partitions_after"] = len(details[spec.Topic].Partitions)
	// a few records, then group offsets committed and fetched through kadm
	prod, err := newFranz(spec, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return nil, err
	}
	var recs []*kgo.Record
	for i := 0; i < 8; i++ {
		recs = append(recs, &kgo.Record{Topic: spec.Topic, Partition: int32(i % 4), Value: []byte("x")})
	}
	if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return nil, err
	}
	prod.Close()
	ends, err := adm.ListEndOffsets(ctx, spec.Topic)
	if err != nil {
		return nil, err
	}
	endMap := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { endMap[o.Partition] = o.Offset })
	out["end"] = endMap
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: spec.Topic, Partition: 0, At: 1, LeaderEpoch: -1, Metadata: "m0"})
	offs.Add(kadm.Offset{Topic: spec.Topic, Partition: 3, At: 2, LeaderEpoch: -1})
	commit, err := adm.CommitOffsets(ctx, spec.Group, offs)
	if err != nil {
		return nil, err
	}
	out["commit"] = errName(commit.Error())
	fetched, err := adm.FetchOffsets(ctx, spec.Group)
	if err != nil {
		return nil, err
	}
	got := map[int32][2]string{}
	fetched.Each(func(o kadm.OffsetResponse) { got[o.Partition] = [2]string{fmt.Sprint(o.At), o.Metadata} })
	out["fetched"] = got
	groups, err := adm.ListGroups(ctx)
	if err != nil {
		return nil, err
	}
	out["group_listed"] = false
	for _, g := range groups.Groups() {
		if g == spec.Group {
			out["group_listed"] = true
		}
	}
	del, err := adm.DeleteTopics(ctx, spec.Topic)
	if err != nil {
		return nil, err
	}
	out["delete"] = errName(del[spec.Topic].Err)
	missing, err := adm.DeleteTopics(ctx, spec.Topic+"-missing")
	if err == nil {
		err = missing[spec.Topic+"-missing"].Err
	}
	out["delete_missing"] = errName(err)
	return out, nil
}

// franzACL: on a SASL listener with an authorizer, a user without ACLs is denied produce and
// topic creation as Kafka answers them; after the super user grants Write, the produce works.
func franzACL(spec *Spec) (any, error) {
	// TLS comes from franzOpts (spec.CAFile)
	ctx, _, adm, done, err := franzSetup(spec, franzSASL(spec.Mechanism, spec.AdminUser, spec.AdminPass))
	if err != nil {
		return nil, err
	}
	defer done()
	out := map[string]any{}
	if err := createTopic(ctx, adm, spec.Topic, 1, nil); err != nil {
		return nil, fmt.Errorf("admin create: %w", err)
	}
	userOpts := append([]kgo.Opt{}, franzSASL(spec.Mechanism, spec.User, spec.Password),
		kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.LeaderAck()), kgo.RetryTimeout(3*time.Second),
		kgo.ProduceRequestTimeout(5*time.Second))
	userCl, err := newFranz(spec, userOpts...)
	if err != nil {
		return nil, err
	}
	defer userCl.Close()
	userAdm := kadm.NewClient(userCl)
	pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
	res := userCl.ProduceSync(pctx, &kgo.Record{Topic: spec.Topic, Value: []byte("denied")})
	pcancel()
	out["produce_denied"] = errName(res.FirstErr())
	ct, err := userAdm.CreateTopic(ctx, 1, 1, nil, spec.Topic+"-by-user")
	if err != nil {
		out["create_denied"] = errName(err)
	} else {
		out["create_denied"] = errName(ct.Err)
	}
	acl := kadm.NewACLs().Allow("User:"+spec.User).AllowHosts().Topics(spec.Topic).
		Operations(kadm.OpWrite, kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral)
	cr, err := adm.CreateACLs(ctx, acl)
	if err != nil {
		return nil, fmt.Errorf("create acls: %w", err)
	}
	for _, r := range cr {
		if r.Err != nil {
			return nil, fmt.Errorf("create acl: %w", r.Err)
		}
	}
	described, err := adm.DescribeACLs(ctx, kadm.NewACLs().Allow("User:"+spec.User).AllowHosts().
		Topics(spec.Topic).Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny))
	if err != nil {
		return nil, err
	}
	n := 0
	for _, d := range described {
		n += len(d.Described)
	}
	out["acls_described"] = n
	user2, err := newFranz(spec, userOpts...)
	if err != nil {
		return nil, err
	}
	defer user2.Close()
	res = user2.ProduceSync(ctx, &kgo.Record{Topic: spec.Topic, Value: []byte("allowed")})
	out["produce_allowed"] = errName(res.FirstErr())
	return out, nil
}
