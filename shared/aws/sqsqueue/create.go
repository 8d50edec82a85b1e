package sqsqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// dlqRetention keeps dead letters for SQS's maximum, 14 days.
const dlqRetention = 14 * 24 * 3600

// CreateQueues creates (or updates) the dead-letter queue dlqName and the
// queue queueName with visibilityTimeout seconds and a redrive policy to the
// dead-letter queue after MaxReceiveCount receives, and returns the queue's
// URL. It is idempotent: existing queues get the same attributes set. It is
// for `genway aws init` and tests; deployments use the SAM template.
func CreateQueues(ctx context.Context, client *sqs.Client, queueName, dlqName string, visibilityTimeout int) (string, error) {
	dlqURL, err := ensureQueue(ctx, client, dlqName, map[string]string{
		string(types.QueueAttributeNameMessageRetentionPeriod): strconv.Itoa(dlqRetention),
	})
	if err != nil {
		return "", err
	}
	attrs, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(dlqURL), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn},
	})
	if err != nil {
		return "", fmt.Errorf("get ARN of queue %s: %w", dlqName, err)
	}
	redrive, err := json.Marshal(map[string]string{
		"deadLetterTargetArn": attrs.Attributes[string(types.QueueAttributeNameQueueArn)],
		"maxReceiveCount":     strconv.Itoa(MaxReceiveCount),
	})
	if err != nil {
		return "", fmt.Errorf("create queue %s: %w", queueName, err)
	}
	return ensureQueue(ctx, client, queueName, map[string]string{
		string(types.QueueAttributeNameVisibilityTimeout): strconv.Itoa(visibilityTimeout),
		string(types.QueueAttributeNameRedrivePolicy):     string(redrive),
	})
}

// ensureQueue creates queue name with attrs, or sets attrs on it if it
// exists with other attributes (CreateQueue refuses that).
func ensureQueue(ctx context.Context, client *sqs.Client, name string, attrs map[string]string) (string, error) {
	out, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err == nil {
		return aws.ToString(out.QueueUrl), nil
	}
	var exists *types.QueueNameExists
	if !errors.As(err, &exists) {
		return "", fmt.Errorf("create queue %s: %w", name, err)
	}
	u, err := client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
	if err != nil {
		return "", fmt.Errorf("get URL of queue %s: %w", name, err)
	}
	if _, err := client.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: u.QueueUrl, Attributes: attrs}); err != nil {
		return "", fmt.Errorf("set attributes of queue %s: %w", name, err)
	}
	return aws.ToString(u.QueueUrl), nil
}
