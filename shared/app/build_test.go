package app

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// TestDynamoStore: the functions' and the AWS-backed serve's store has the
// configuration's tables and retentions.
func TestDynamoStore(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		records string
		jobs    time.Duration
		recRet  time.Duration
	}{
		{"defaults", nil, "genway-records", 0 /* the store's DefaultJobRetention */, DefaultConfig(Lambda).RecordRetention},
		{"set", map[string]string{"GENWAY_RECORDS_TABLE": "recs", "GENWAY_JOB_RETENTION_DAYS": "7", "GENWAY_RECORD_DAYS": "3"},
			"recs", 7 * 24 * time.Hour, 3 * 24 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := LoadConfig(Lambda, func(k string) string { return tt.env[k] })
			if err != nil {
				t.Fatal(err)
			}
			s := DynamoStore(c, dynamodb.New(dynamodb.Options{Region: "us-east-1"}))
			if s.RecordsTable != tt.records || s.RecordRetention != tt.recRet || s.JobRetention != tt.jobs {
				t.Errorf("store: records table %q, record retention %v, job retention %v; want %q, %v, %v",
					s.RecordsTable, s.RecordRetention, s.JobRetention, tt.records, tt.recRet, tt.jobs)
			}
		})
	}
}
