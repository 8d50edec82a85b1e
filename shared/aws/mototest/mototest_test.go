package mototest

import (
	"context"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

func TestChildEnv(t *testing.T) {
	tests := []struct {
		name string
		in   []string
		want []string
	}{
		{"drops AWS vars", []string{"PATH=/bin", "AWS_CA_BUNDLE=/x.pem", "AWS_PROFILE=prod", "HOME=/root"}, []string{"PATH=/bin", "HOME=/root"}},
		{"keeps look-alikes", []string{"MY_AWS_X=1"}, []string{"MY_AWS_X=1"}},
		{"empty", nil, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := childEnv(tt.in); !slices.Equal(got, tt.want) {
				t.Errorf("childEnv(%q) = %q; want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestStartConfigReset(t *testing.T) {
	t.Setenv("AWS_PROFILE", "does-not-exist")
	t.Setenv("AWS_CA_BUNDLE", "/does/not/exist.pem")
	endpoint := Start(t)
	client := sqs.NewFromConfig(Config(endpoint))
	ctx := context.Background()
	if _, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("q1")}); err != nil {
		t.Fatalf("CreateQueue = %v; want nil (config must ignore AWS_PROFILE/AWS_CA_BUNDLE)", err)
	}
	out, err := client.ListQueues(ctx, &sqs.ListQueuesInput{})
	if err != nil || len(out.QueueUrls) != 1 {
		t.Fatalf("ListQueues = %v, %v; want 1 queue", out, err)
	}
	if err := Reset(endpoint); err != nil {
		t.Fatalf("Reset(%q) = %v; want nil", endpoint, err)
	}
	out, err = client.ListQueues(ctx, &sqs.ListQueuesInput{})
	if err != nil || len(out.QueueUrls) != 0 {
		t.Fatalf("ListQueues after Reset = %v, %v; want 0 queues", out.QueueUrls, err)
	}
}
