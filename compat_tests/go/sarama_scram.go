package main

// sarama's SCRAM needs a SCRAMClient from the application (most use xdg-go/scram); this one
// wraps franz-go's SCRAM exchange, already pinned here, so that sarama's own SaslHandshake /
// SaslAuthenticate framing carries it.

import (
	"context"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

type saramaSCRAM struct {
	sha512  bool
	session sasl.Session
	first   []byte
	started bool
	done    bool
}

func (s *saramaSCRAM) Begin(user, password, authzID string) error {
	auth := scram.Auth{User: user, Pass: password, Zid: authzID}
	mech := auth.AsSha256Mechanism()
	if s.sha512 {
		mech = auth.AsSha512Mechanism()
	}
	var err error
	s.session, s.first, err = mech.Authenticate(context.Background(), "")
	return err
}

func (s *saramaSCRAM) Step(challenge string) (string, error) {
	if !s.started {
		s.started = true
		return string(s.first), nil
	}
	done, resp, err := s.session.Challenge([]byte(challenge))
	s.done = done
	return string(resp), err
}

func (s *saramaSCRAM) Done() bool { return s.done }

// saramaSASLMechanism sets cfg's SASL mechanism from spec.Mechanism.
func saramaSASLMechanism(cfg *sarama.Config, mechanism string) {
	switch mechanism {
	case "SCRAM-SHA-256":
		cfg.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA256
		cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &saramaSCRAM{} }
	case "SCRAM-SHA-512":
		cfg.Net.SASL.Mechanism = sarama.SASLTypeSCRAMSHA512
		cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &saramaSCRAM{sha512: true} }
	default:
		cfg.Net.SASL.Mechanism = sarama.SASLTypePlaintext
	}
}
