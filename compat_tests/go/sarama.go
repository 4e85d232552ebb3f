package main

// IBM/sarama scenarios.

var saramaScenarios = map[string]func(*Spec) (any, error){}
