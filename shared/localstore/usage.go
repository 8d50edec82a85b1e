package localstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/genway/genway/shared/credits"
)

// usageKey is account \x00 day \x00 model: an account's usage sorts by day,
// then model, so a day range is one cursor walk.
func usageKey(account, day, model string) []byte {
	return []byte(account + "\x00" + day + "\x00" + model)
}

// AddUsage implements credits.UsageStore in one transaction: the usage
// increment and, when u.Credits > 0, the account debit and its Chat ledger
// entry commit together or not at all. The entry is looked up first, in the
// same transaction: if it exists, id was applied before and nothing is
// written. A sum (the usage's credits, the key's spend, the balance)
// that would pass ±credits.MaxAmount is refused, wrapping
// credits.ErrInvalidUsage and credits.ErrAmountRange.
func (s *Store) AddUsage(ctx context.Context, id string, u credits.Usage) error {
	if err := credits.CheckUsage(id, u); err != nil {
		return err
	}
	entryID := credits.ChatEntryID(id)
	at := s.now().Unix()
	err := s.update(func(tx *bolt.Tx) error {
		var a credits.Account
		ab := tx.Bucket([]byte(bucketAccounts))
		if u.Credits > 0 {
			if tx.Bucket([]byte(bucketLedger)).Get([]byte(entryID)) != nil {
				return refuse(errApplied)
			}
			ok, err := getJSON(ab, []byte(u.Account), &a)
			if err != nil {
				return err
			}
			if !ok {
				return refuse(credits.ErrAccountNotFound)
			}
		}
		ub := tx.Bucket([]byte(bucketUsage))
		k := usageKey(u.Account, u.Day, u.Model)
		sum := credits.Usage{}
		if _, err := getJSON(ub, k, &sum); err != nil {
			return err
		}
		sum.Account, sum.Day, sum.Model = u.Account, u.Day, u.Model
		sum.Requests += u.Requests
		sum.PromptTokens += u.PromptTokens
		sum.CompletionTokens += u.CompletionTokens
		var err error
		if sum.Credits, err = add("usage credits", sum.Credits, u.Credits); err != nil {
			return err
		}
		if err := putJSON(ub, k, sum); err != nil {
			return err
		}
		if u.Credits == 0 {
			return nil
		}
		if a.Balance, err = add("balance", a.Balance, -u.Credits); err != nil {
			return err
		}
		if a.Available, err = add("available", a.Balance, -a.Held); err != nil {
			return err
		}
		if err := putJSON(ab, []byte(u.Account), a); err != nil {
			return err
		}
		if err := settleOnKey(tx, u.Key, u.Credits, 0); err != nil {
			return err
		}
		return putEntry(tx, credits.Entry{ID: entryID, Account: u.Account, Kind: credits.Chat, Amount: u.Credits, Key: u.Key, At: at})
	})
	switch {
	case errors.Is(err, errApplied):
		return nil
	case errors.Is(err, credits.ErrAmountRange): // no retry can write it
		return fmt.Errorf("add usage of %s for %s on %s: %w: %w", u.Model, u.Account, u.Day, credits.ErrInvalidUsage, err)
	case err != nil:
		return fmt.Errorf("add usage of %s for %s on %s: %w", u.Model, u.Account, u.Day, err)
	}
	return nil
}

// errApplied is the refusal of an AddUsage whose id was applied before.
var errApplied = errors.New("usage already applied")

// Usage implements credits.UsageStore.
func (s *Store) Usage(ctx context.Context, account, fromDay, toDay string) ([]credits.Usage, error) {
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
