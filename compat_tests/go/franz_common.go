package main

// Helpers every franz-go scenario shares: its context and admin client, and the records it writes.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// franzSetup: the scenario's context, ending at its deadline, and a client on spec.Brokers
// (with `extra` options) with its kadm admin; done() closes the client and the context.
func franzSetup(spec *Spec, extra ...kgo.Opt) (context.Context, *kgo.Client, *kadm.Client, func(), error) {
	ctx, cancel := context.WithDeadline(context.Background(), deadline(spec))
	cl, err := newFranz(spec, extra...)
	if err != nil {
		cancel()
		return nil, nil, nil, nil, err
	}
	return ctx, cl, kadm.NewClient(cl), func() { cl.Close(); cancel() }, nil
}

// franzRecords: records from..to-1 of `tag` on `topic` (franzRecord), partition i % partitions.
func franzRecords(topic, tag string, from, to, partitions int, baseTS int64) []*kgo.Record {
	var recs []*kgo.Record
	for i := from; i < to; i++ {
		recs = append(recs, franzRecord(topic, tag, i, partitions, baseTS))
	}
	return recs
}
