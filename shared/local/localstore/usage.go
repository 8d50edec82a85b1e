package localstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/genway/genway/shared/credits"
)

// appendUsageKey appends the key of a usage row to b: account \x00 day
// \x00 model, so that an account's usage sorts by day, then model, and a
// day range is one cursor walk.
func appendUsageKey(b []byte, account, day, model string) []byte {
	return append(append(append(append(append(b, account...), 0), day...), 0), model...)
}

// Usage implements credits.UsageStore.
func (s *Store) Usage(ctx context.Context, account, fromDay, toDay string) ([]credits.Usage, error) {
	s.awaitWrites(ctx)
	out, err := readDays[credits.Usage](s, bucketUsage, account, fromDay, toDay)
	if err != nil {
		return nil, fmt.Errorf("usage of %s: %w", account, err)
	}
	return out, nil
}

// readDays decodes the values of bucket whose keys are account \x00 day
// ..., day from fromDay to toDay (inclusive; "" is open-ended; checked
// with credits.CheckDayRange): one cursor walk, in key order.
func readDays[T any](s *Store, bucket, account, fromDay, toDay string) ([]T, error) {
	if err := credits.CheckDayRange(fromDay, toDay); err != nil {
		return nil, err
	}
	var out []T
	err := s.db.View(func(tx *bolt.Tx) error {
		prefix := account + "\x00"
		c := tx.Bucket([]byte(bucket)).Cursor()
		for k, v := c.Seek([]byte(prefix + fromDay)); k != nil; k, v = c.Next() {
			rest, ok := strings.CutPrefix(string(k), prefix)
			if !ok {
				break
			}
			if day := rest[:min(len(rest), len(credits.DayLayout))]; toDay != "" && day > toDay {
				break
			}
			var t T
			if err := json.Unmarshal(v, &t); err != nil {
				return fmt.Errorf("decode %s %q: %w", bucket, k, err)
			}
			out = append(out, t)
		}
		return nil
	})
	return out, err
}

// jobUsageKey is account \x00 day \x00 type \x00 model: an account's job
// usage sorts by day, then type, then model.
func jobUsageKey(account, day, typ, model string) []byte {
	return []byte(account + "\x00" + day + "\x00" + typ + "\x00" + model)
}

// addJobUsage adds the job usage of settling e, if any, in tx.
func addJobUsage(tx *bolt.Tx, e credits.Entry) error {
	inc, ok := credits.JobUsageOf(e)
	if !ok {
		return nil
	}
	b := tx.Bucket([]byte(bucketJobUsage))
	k := jobUsageKey(inc.Account, inc.Day, inc.JobType, inc.Model)
	var sum credits.JobUsage
	if _, err := getJSON(b, k, &sum); err != nil {
		return err
	}
	sum.Account, sum.Day, sum.JobType, sum.Model = inc.Account, inc.Day, inc.JobType, inc.Model
	sum.Jobs += inc.Jobs
	var err error
	if sum.Credits, err = add("job usage credits", sum.Credits, inc.Credits); err != nil {
		return err
	}
	return putJSON(b, k, sum)
}

// JobUsage implements credits.UsageStore: one cursor walk over the
// account's days.
func (s *Store) JobUsage(ctx context.Context, account, fromDay, toDay string) ([]credits.JobUsage, error) {
	out, err := readDays[credits.JobUsage](s, bucketJobUsage, account, fromDay, toDay)
	if err != nil {
		return nil, fmt.Errorf("job usage of %s: %w", account, err)
	}
	return out, nil
}
