// Command odradek-compat drives a Kafka broker with Go clients (franz-go, sarama) for the
// tests in compat_tests/test_franz_go.py and compat_tests/test_sarama.py.
//
//	odradek-compat <family> <scenario> '<json spec>'
//
// Each scenario prints one JSON object on stdout: what the client saw (records, offsets,
// errors as Kafka names them). The Python test decides whether it is right. Progress and
// client logs go to stderr.
package main

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"time"
)

// Spec is what the test passes: the broker, names, and the scenario's parameters.
type Spec struct {
	Brokers    []string `json:"brokers"`
	Topic      string   `json:"topic"`
	Output     string   `json:"output"`
	Group      string   `json:"group"`
	Count      int      `json:"count"`
	Partitions int      `json:"partitions"`
	Replicas   int16    `json:"replicas"`
	BaseTS     int64    `json:"base_ts"`
	Cases      []Case   `json:"cases"`
	Protocol   string   `json:"protocol"`
	Balancer   string   `json:"balancer"`
	Version    string   `json:"version"`
	User       string   `json:"user"`
	Password   string   `json:"password"`
	AdminUser  string   `json:"admin_user"`
	AdminPass  string   `json:"admin_password"`
	Mechanism  string   `json:"mechanism"`
	CAFile     string   `json:"ca_file"`
	TxnID      string   `json:"txn_id"`
	TimeoutS   float64  `json:"timeout_s"`
}

// Case is one produce case: a codec and an acks setting ("all", "1", "0").
type Case struct {
	Codec string `json:"codec"`
	Acks  string `json:"acks"`
	Topic string `json:"topic"`
}

// Rec is a record as a consumer saw it; bytes are hex, a null key is nil.
type Rec struct {
	Partition int32       `json:"p"`
	Offset    int64       `json:"o"`
	Timestamp int64       `json:"ts"`
	Key       *string     `json:"key"`
	Value     string      `json:"value"`
	Headers   [][2]string `json:"headers"`
}

// Shape of record i as every producer here writes it: key "key-i" (null for every 7th),
// value "value-i-<tag>" (empty for every 11th), headers idx=i and a repeated "dup" header,
// timestamp base+10*i, partition i % partitions.
func recordKey(i int) []byte {
	if i%7 == 3 {
		return nil
	}
	return []byte(fmt.Sprintf("key-%d", i))
}

func recordValue(tag string, i int) []byte {
	if i%11 == 5 {
		return []byte{}
	}
	return []byte(fmt.Sprintf("value-%d-%s", i, tag))
}

func recordHeaders(i int) [][2][]byte {
	return [][2][]byte{
		{[]byte("idx"), []byte(fmt.Sprint(i))},
		{[]byte("dup"), []byte("a")},
		{[]byte("dup"), []byte{}},
	}
}

func hexOrNil(b []byte) *string {
	if b == nil {
		return nil
	}
	s := hex.EncodeToString(b)
	return &s
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05.000")+" "+format+"\n", args...)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "FATAL:", err)
	os.Exit(1)
}

func deadline(spec *Spec) time.Time {
	t := spec.TimeoutS
	if t <= 0 {
		t = 60
	}
	return time.Now().Add(time.Duration(t * float64(time.Second)))
}

func emit(v any) {
	enc := json.NewEncoder(os.Stdout)
	if err := enc.Encode(v); err != nil {
		fail(err)
	}
}

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: odradek-compat <franz|sarama> <scenario> '<json spec>'")
		os.Exit(2)
	}
	var spec Spec
	if err := json.Unmarshal([]byte(os.Args[3]), &spec); err != nil {
		fail(err)
	}
	if spec.Replicas > 0 {
		replicas = spec.Replicas
	}
	var scenarios map[string]func(*Spec) (any, error)
	switch os.Args[1] {
	case "franz":
		scenarios = franzScenarios
	case "sarama":
		scenarios = saramaScenarios
	default:
		fail(fmt.Errorf("unknown family %q", os.Args[1]))
	}
	run, ok := scenarios[os.Args[2]]
	if !ok {
		fail(fmt.Errorf("unknown %s scenario %q", os.Args[1], os.Args[2]))
	}
	out, err := run(&spec)
	if err != nil {
		fail(err)
	}
	emit(out)
}
