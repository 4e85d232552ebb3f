package main

// IBM/sarama scenarios. spec.Version "min" is V2_1_0_0, the oldest client Kafka 4 serves
// (KIP-896 removed the older request versions); "max" is sarama.MaxVersion.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

var saramaScenarios = map[string]func(*Spec) (any, error){
	"produce": saramaProduce,
	"group":   saramaGroup,
	"txn":     saramaTxn,
	"admin":   saramaAdmin,
	"sasl":    saramaSASL,
}

func saramaConfig(spec *Spec) (*sarama.Config, error) {
	cfg := sarama.NewConfig()
	cfg.ClientID = "odradek-sarama"
	switch spec.Version {
	case "max":
		cfg.Version = sarama.MaxVersion
	default:
		cfg.Version = sarama.V2_1_0_0
	}
	cfg.Producer.Return.Successes = true
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Producer.Retry.Max = 10
	cfg.Producer.Retry.Backoff = 100 * time.Millisecond
	cfg.Metadata.Retry.Backoff = 100 * time.Millisecond
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Return.Errors = true
	if spec.CAFile != "" {
		tc, err := tlsConfig(spec.CAFile)
		if err != nil {
			return nil, err
		}
		cfg.Net.TLS.Enable = true
		cfg.Net.TLS.Config = tc
	}
	if spec.Mechanism != "" {
		cfg.Net.SASL.Enable = true
		saramaSASLMechanism(cfg, spec.Mechanism)
		cfg.Net.SASL.User = spec.User
		cfg.Net.SASL.Password = spec.Password
	}
	return cfg, nil
}

func saramaMessage(topic, tag string, i, partitions int, baseTS int64) *sarama.ProducerMessage {
	m := &sarama.ProducerMessage{Topic: topic, Partition: int32(i % partitions),
		Value: sarama.ByteEncoder(recordValue(tag, i)), Timestamp: time.UnixMilli(baseTS + 10*int64(i))}
	if k := recordKey(i); k != nil {
		m.Key = sarama.ByteEncoder(k)
	}
	for _, h := range recordHeaders(i) {
		m.Headers = append(m.Headers, sarama.RecordHeader{Key: h[0], Value: h[1]})
	}
	return m
}

// saramaMessages: messages from..to-1 of `tag` on `topic` (saramaMessage).
func saramaMessages(topic, tag string, from, to, partitions int, baseTS int64) []*sarama.ProducerMessage {
	var msgs []*sarama.ProducerMessage
	for i := from; i < to; i++ {
		msgs = append(msgs, saramaMessage(topic, tag, i, partitions, baseTS))
	}
	return msgs
}

// saramaSetup: the spec's config and a ClusterAdmin on it, for the caller to close.
func saramaSetup(spec *Spec) (*sarama.Config, sarama.ClusterAdmin, error) {
	cfg, err := saramaConfig(spec)
	if err != nil {
		return nil, nil, err
	}
	adm, err := sarama.NewClusterAdmin(spec.Brokers, cfg)
	if err != nil {
		return nil, nil, err
	}
	return cfg, adm, nil
}

func saramaRec(m *sarama.ConsumerMessage) Rec {
	out := Rec{Partition: m.Partition, Offset: m.Offset, Timestamp: m.Timestamp.UnixMilli(),
		Key: hexOrNil(m.Key), Value: fmt.Sprintf("%x", m.Value), Headers: [][2]string{}}
	for _, h := range m.Headers {
		out.Headers = append(out.Headers, [2]string{string(h.Key), fmt.Sprintf("%x", h.Value)})
	}
	return out
}

func saramaCreate(adm sarama.ClusterAdmin, topic string, partitions int32, entries map[string]*string) error {
	err := adm.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: replicas, ConfigEntries: entries}, false)
	if err != nil && !errors.Is(err, sarama.ErrTopicAlreadyExists) {
		return fmt.Errorf("create %s: %w", topic, err)
	}
	return nil
}

// saramaReadAll reads every partition of `topic` from the oldest offset until `want` records.
func saramaReadAll(spec *Spec, cfg *sarama.Config, topic string, partitions, want int) ([]Rec, error) {
	consumer, err := sarama.NewConsumer(spec.Brokers, cfg)
	if err != nil {
		return nil, err
	}
	defer consumer.Close()
	msgs := make(chan *sarama.ConsumerMessage, want+16)
	for p := 0; p < partitions; p++ {
		pc, err := consumer.ConsumePartition(topic, int32(p), sarama.OffsetOldest)
		if err != nil {
			return nil, err
		}
		defer pc.AsyncClose()
		go func() {
			for m := range pc.Messages() {
				msgs <- m
			}
		}()
	}
	var out []Rec
	timeout := time.After(time.Until(deadline(spec)))
	for len(out) < want {
		select {
		case m := <-msgs:
			out = append(out, saramaRec(m))
		case <-timeout:
			return out, fmt.Errorf("read %d of %d records of %s", len(out), want, topic)
		}
	}
	return out, nil
}

// saramaProduce: per case a topic written by the sync producer ("async": the async one)
// with the case's codec and acks, read back by partition consumers.
func saramaProduce(spec *Spec) (any, error) {
	_, adm, err := saramaSetup(spec)
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	var results []produceCase
	for _, c := range spec.Cases {
		res := produceCase{Codec: c.Codec, Acks: c.Acks, Topic: c.Topic}
		if err := saramaCreate(adm, c.Topic, int32(spec.Partitions), nil); err != nil {
			return nil, err
		}
		cfg, _ := saramaConfig(spec)
		switch c.Codec {
		case "gzip":
			cfg.Producer.Compression = sarama.CompressionGZIP
		case "snappy":
			cfg.Producer.Compression = sarama.CompressionSnappy
		case "lz4":
			cfg.Producer.Compression = sarama.CompressionLZ4
		case "zstd":
			cfg.Producer.Compression = sarama.CompressionZSTD
		}
		switch c.Acks {
		case "1", "async":
			cfg.Producer.RequiredAcks = sarama.WaitForLocal
		default:
			cfg.Producer.RequiredAcks = sarama.WaitForAll
			cfg.Producer.Idempotent = true
			cfg.Net.MaxOpenRequests = 1
		}
		msgs := saramaMessages(c.Topic, c.Codec+"-"+c.Acks, 0, spec.Count, spec.Partitions, spec.BaseTS)
		if c.Acks == "async" {
			prod, err := sarama.NewAsyncProducer(spec.Brokers, cfg)
			if err != nil {
				return nil, err
			}
			go func() {
				for _, m := range msgs {
					prod.Input() <- m
				}
			}()
			for range msgs {
				select {
				case m := <-prod.Successes():
					res.Sent = append(res.Sent, [2]int64{int64(m.Partition), m.Offset})
				case e := <-prod.Errors():
					res.Error = e.Err.Error()
				}
			}
			prod.Close()
		} else {
			prod, err := sarama.NewSyncProducer(spec.Brokers, cfg)
			if err != nil {
				return nil, err
			}
			if err := prod.SendMessages(msgs); err != nil {
				res.Error = err.Error()
			}
			prod.Close()
			for _, m := range msgs {
				res.Sent = append(res.Sent, [2]int64{int64(m.Partition), m.Offset})
			}
		}
		if res.Error == "" {
			res.Records, err = saramaReadAll(spec, cfg, c.Topic, spec.Partitions, spec.Count)
			if err != nil {
				res.Error = err.Error()
			}
		}
		results = append(results, res)
		logf("case %s/%s done", c.Codec, c.Acks)
	}
	return map[string]any{"cases": results}, nil
}

type saramaMember struct {
	name     string
	mu       sync.Mutex
	assigned []int32
	read     int
	note     func(string)
}

func (m *saramaMember) Setup(s sarama.ConsumerGroupSession) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ps []int32
	for _, claimed := range s.Claims() {
		ps = append(ps, claimed...)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	m.assigned = ps
	return nil
}

func (m *saramaMember) Cleanup(sarama.ConsumerGroupSession) error {
	m.mu.Lock()
	m.assigned = nil
	m.mu.Unlock()
	return nil
}

func (m *saramaMember) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for msg := range c.Messages() {
		m.note(fmt.Sprintf("%d-%d", msg.Partition, msg.Offset))
		m.mu.Lock()
		m.read++
		m.mu.Unlock()
		s.MarkMessage(msg, "")
	}
	return nil
}

func (m *saramaMember) owned() []int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]int32(nil), m.assigned...)
}

// saramaGroup: two members of a group with the named strategy; the second half of the
// records is written once the partitions are split; together they read every record.
func saramaGroup(spec *Spec) (any, error) {
	ctx, cancel := context.WithDeadline(context.Background(), deadline(spec))
	defer cancel()
	cfg, adm, err := saramaSetup(spec)
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	switch spec.Balancer {
	case "sticky":
		cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategySticky()}
	case "roundrobin":
		cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyRoundRobin()}
	default:
		cfg.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyRange()}
	}
	cfg.Consumer.Offsets.AutoCommit.Interval = 100 * time.Millisecond
	if err := saramaCreate(adm, spec.Topic, int32(spec.Partitions), nil); err != nil {
		return nil, err
	}
	prod, err := sarama.NewSyncProducer(spec.Brokers, cfg)
	if err != nil {
		return nil, err
	}
	defer prod.Close()
	send := func(from, to int) error {
		msgs := saramaMessages(spec.Topic, "g", from, to, spec.Partitions, spec.BaseTS)
		return prod.SendMessages(msgs)
	}
	half := spec.Count / 2
	if err := send(0, half); err != nil {
		return nil, err
	}
	var umu sync.Mutex
	union := map[string]int{}
	note := func(k string) {
		umu.Lock()
		union[k]++
		umu.Unlock()
	}
	size := func() int {
		umu.Lock()
		defer umu.Unlock()
		return len(union)
	}
	wait := func(cond func() bool, what string) error {
		for !cond() {
			if ctx.Err() != nil {
				return fmt.Errorf("timed out waiting for %s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
		return nil
	}
	var wg sync.WaitGroup
	start := func(m *saramaMember) (sarama.ConsumerGroup, error) {
		g, err := sarama.NewConsumerGroup(spec.Brokers, spec.Group, cfg)
		if err != nil {
			return nil, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if err := g.Consume(ctx, []string{spec.Topic}, m); err != nil {
					if errors.Is(err, sarama.ErrClosedConsumerGroup) {
						return
					}
					logf("%s consume: %v", m.name, err)
				}
			}
		}()
		return g, nil
	}
	a := &saramaMember{name: "a", note: note}
	ga, err := start(a)
	if err != nil {
		return nil, err
	}
	if err := wait(func() bool { return size() >= half }, "member a reading the first half"); err != nil {
		return nil, err
	}
	b := &saramaMember{name: "b", note: note}
	gb, err := start(b)
	if err != nil {
		return nil, err
	}
	split := func() bool {
		oa, ob := a.owned(), b.owned()
		return len(oa) > 0 && len(ob) > 0 && len(oa)+len(ob) == spec.Partitions
	}
	if err := wait(split, "the partitions split"); err != nil {
		return nil, err
	}
	oa, ob := a.owned(), b.owned()
	if err := send(half, spec.Count); err != nil {
		return nil, err
	}
	if err := wait(func() bool { return size() >= spec.Count }, "every record"); err != nil {
		return nil, fmt.Errorf("%w: read %d, a owns %v, b owns %v", err, size(), a.owned(), b.owned())
	}
	ga.Close()
	gb.Close()
	cancel()
	wg.Wait()
	a.mu.Lock()
	b.mu.Lock()
	aRead, bRead := a.read, b.read
	a.mu.Unlock()
	b.mu.Unlock()
	adm2, err := sarama.NewClusterAdmin(spec.Brokers, cfg)
	if err != nil {
		return nil, err
	}
	defer adm2.Close()
	offs, err := adm2.ListConsumerGroupOffsets(spec.Group, nil)
	if err != nil {
		return nil, err
	}
	committed := map[int32]int64{}
	for p, block := range offs.Blocks[spec.Topic] {
		committed[p] = block.Offset
	}
	return map[string]any{"a_owns": oa, "b_owns": ob, "a_read": aRead, "b_read": bRead,
		"distinct": size(), "committed": committed}, nil
}

// saramaTxn: an aborted transaction, then a committed one with AddOffsetsToTxn; read back
// with read_committed and read_uncommitted consumers.
func saramaTxn(spec *Spec) (any, error) {
	cfg, adm, err := saramaSetup(spec)
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	if err := saramaCreate(adm, spec.Output, int32(spec.Partitions), nil); err != nil {
		return nil, err
	}
	tcfg, _ := saramaConfig(spec)
	tcfg.Producer.Idempotent = true
	tcfg.Producer.RequiredAcks = sarama.WaitForAll
	tcfg.Producer.Transaction.ID = spec.TxnID
	tcfg.Net.MaxOpenRequests = 1
	prod, err := sarama.NewSyncProducer(spec.Brokers, tcfg)
	if err != nil {
		return nil, err
	}
	if err := prod.BeginTxn(); err != nil {
		return nil, err
	}
	for p := 0; p < spec.Partitions; p++ {
		m := &sarama.ProducerMessage{Topic: spec.Output, Partition: int32(p), Value: sarama.StringEncoder(fmt.Sprintf("aborted-%d", p))}
		if _, _, err := prod.SendMessage(m); err != nil {
			return nil, fmt.Errorf("send aborted: %w", err)
		}
	}
	if err := prod.AbortTxn(); err != nil {
		return nil, fmt.Errorf("abort: %w", err)
	}
	if err := prod.BeginTxn(); err != nil {
		return nil, err
	}
	msgs := saramaMessages(spec.Output, "txn", 0, spec.Count, spec.Partitions, spec.BaseTS)
	if err := prod.SendMessages(msgs); err != nil {
		return nil, fmt.Errorf("send: %w", err)
	}
	offsets := map[string][]*sarama.PartitionOffsetMetadata{spec.Output: {{Partition: 0, Offset: 7}}}
	if err := prod.AddOffsetsToTxn(offsets, spec.Group); err != nil {
		return nil, fmt.Errorf("add offsets: %w", err)
	}
	if err := prod.CommitTxn(); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	prod.Close()
	rc, _ := saramaConfig(spec)
	rc.Consumer.IsolationLevel = sarama.ReadCommitted
	committed, err := saramaReadAll(spec, rc, spec.Output, spec.Partitions, spec.Count)
	if err != nil {
		return nil, err
	}
	uncommitted, err := saramaReadAll(spec, cfg, spec.Output, spec.Partitions, spec.Count+spec.Partitions)
	if err != nil {
		return nil, err
	}
	offs, err := adm.ListConsumerGroupOffsets(spec.Group, nil)
	if err != nil {
		return nil, err
	}
	groupOffsets := map[int32]int64{}
	for p, block := range offs.Blocks[spec.Output] {
		groupOffsets[p] = block.Offset
	}
	return map[string]any{"committed": committed, "uncommitted": uncommitted, "group_offsets": groupOffsets}, nil
}

func kerrName(err error) string {
	var ke sarama.KError
	if errors.As(err, &ke) {
		return fmt.Sprint(int16(ke))
	}
	var te *sarama.TopicError
	if errors.As(err, &te) {
		return fmt.Sprint(int16(te.Err))
	}
	if err == nil {
		return "0"
	}
	return err.Error()
}

// saramaAdmin: ClusterAdmin topics, partitions, configs, and the offset manager.
func saramaAdmin(spec *Spec) (any, error) {
	cfg, err := saramaConfig(spec)
	if err != nil {
		return nil, err
	}
	client, err := sarama.NewClient(spec.Brokers, cfg)
	if err != nil {
		return nil, err
	}
	defer client.Close()
	adm, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	retention := "3600000"
	out["create"] = kerrName(adm.CreateTopic(spec.Topic, &sarama.TopicDetail{NumPartitions: 2, ReplicationFactor: 1,
		ConfigEntries: map[string]*string{"retention.ms": &retention}}, false))
	out["create_again"] = kerrName(adm.CreateTopic(spec.Topic, &sarama.TopicDetail{NumPartitions: 2, ReplicationFactor: 1}, false))
	out["create_partitions"] = kerrName(adm.CreatePartitions(spec.Topic, 3, nil, false))
	md, err := adm.DescribeTopics([]string{spec.Topic})
	if err != nil {
		return nil, err
	}
	out["partitions"] = len(md[0].Partitions)
	describe := func() (map[string]string, error) {
		entries, err := adm.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: spec.Topic})
		if err != nil {
			return nil, err
		}
		got := map[string]string{}
		for _, e := range entries {
			if e.Name == "retention.ms" || e.Name == "max.message.bytes" {
				got[e.Name] = e.Value
			}
		}
		return got, nil
	}
	if out["configs"], err = describe(); err != nil {
		return nil, err
	}
	maxBytes := "200000"
	if cfg.Version.IsAtLeast(sarama.V2_3_0_0) {
		out["alter"] = kerrName(adm.IncrementalAlterConfig(sarama.TopicResource, spec.Topic,
			map[string]sarama.IncrementalAlterConfigsEntry{"max.message.bytes": {Operation: sarama.IncrementalAlterConfigsOperationSet, Value: &maxBytes}}, false))
	} else { // IncrementalAlterConfigs came with Kafka 2.3: the whole-set AlterConfigs
		out["alter"] = kerrName(adm.AlterConfig(sarama.TopicResource, spec.Topic,
			map[string]*string{"max.message.bytes": &maxBytes, "retention.ms": &retention}, false))
	}
	if out["configs_after"], err = describe(); err != nil {
		return nil, err
	}
	// the offset manager commits for a group; ClusterAdmin lists what it committed
	om, err := sarama.NewOffsetManagerFromClient(spec.Group, client)
	if err != nil {
		return nil, err
	}
	pom, err := om.ManagePartition(spec.Topic, 1)
	if err != nil {
		return nil, err
	}
	pom.MarkOffset(5, "meta")
	om.Commit()
	pom.Close()
	om.Close()
	offs, err := adm.ListConsumerGroupOffsets(spec.Group, map[string][]int32{spec.Topic: {0, 1}})
	if err != nil {
		return nil, err
	}
	got := map[int32][2]string{}
	for p, b := range offs.Blocks[spec.Topic] {
		got[p] = [2]string{fmt.Sprint(b.Offset), b.Metadata}
	}
	out["fetched"] = got
	out["delete"] = kerrName(adm.DeleteTopic(spec.Topic))
	out["delete_missing"] = kerrName(adm.DeleteTopic(spec.Topic + "-missing"))
	return out, nil
}

// saramaSASL: a round trip over the configured SASL (and TLS) listener, and a wrong password.
func saramaSASL(spec *Spec) (any, error) {
	cfg, adm, err := saramaSetup(spec)
	if err != nil {
		return nil, err
	}
	if err := saramaCreate(adm, spec.Topic, 1, nil); err != nil {
		return nil, err
	}
	adm.Close()
	prod, err := sarama.NewSyncProducer(spec.Brokers, cfg)
	if err != nil {
		return nil, err
	}
	if _, _, err := prod.SendMessage(&sarama.ProducerMessage{Topic: spec.Topic, Value: sarama.StringEncoder("over-sasl")}); err != nil {
		return nil, err
	}
	prod.Close()
	records, err := saramaReadAll(spec, cfg, spec.Topic, 1, 1)
	if err != nil {
		return nil, err
	}
	bad := *spec
	bad.Password += "-wrong"
	bcfg, _ := saramaConfig(&bad)
	bcfg.Metadata.Retry.Max = 0
	_, err = sarama.NewClient(spec.Brokers, bcfg)
	wrong := ""
	if errors.Is(err, sarama.ErrSASLAuthenticationFailed) {
		wrong = "SASL_AUTHENTICATION_FAILED"
	} else if err != nil {
		wrong = err.Error()
	}
	return map[string]any{"records": records, "wrong_password": wrong}, nil
}
