package localstore

import (
	"context"
	"encoding/json"
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
// increment and, when credits > 0, the account debit and its Chat ledger
// entry commit together or not at all.
func (s *Store) AddUsage(ctx context.Context, account, model, day string, promptTokens, completionTokens int, amount int64) error {
	if err := credits.CheckUsage(account, model, day, promptTokens, completionTokens, amount); err != nil {
		return err
	}
	var entryID string
	if amount > 0 {
		var err error
		if entryID, err = credits.NewChatEntryID(); err != nil {
			return fmt.Errorf("add usage for %s: %w", account, err)
		}
	}
	at := s.now().Unix()
	err := s.update(func(tx *bolt.Tx) error {
		var a credits.Account
		ab := tx.Bucket([]byte(bucketAccounts))
		if amount > 0 {
			ok, err := getJSON(ab, []byte(account), &a)
			if err != nil {
				return err
			}
			if !ok {
				return refuse(credits.ErrAccountNotFound)
			}
		}
		ub := tx.Bucket([]byte(bucketUsage))
		k := usageKey(account, day, model)
		u := credits.Usage{}
		if _, err := getJSON(ub, k, &u); err != nil {
			return err
		}
		u.Account, u.Day, u.Model = account, day, model
		u.Requests++
		u.PromptTokens += int64(promptTokens)
		u.CompletionTokens += int64(completionTokens)
		u.Credits += amount
		if err := putJSON(ub, k, u); err != nil {
			return err
		}
		if amount == 0 {
			return nil
		}
		a.Balance -= amount
		a.Available = a.Balance - a.Held
		if err := putJSON(ab, []byte(account), a); err != nil {
			return err
		}
		return putEntry(tx, credits.Entry{ID: entryID, Account: account, Kind: credits.Chat, Amount: amount, At: at})
	})
	if err != nil {
		return fmt.Errorf("add usage of %s for %s on %s: %w", model, account, day, err)
	}
	return nil
}

// Usage implements credits.UsageStore.
func (s *Store) Usage(ctx context.Context, account, fromDay, toDay string) ([]credits.Usage, error) {
	if err := credits.CheckDayRange(fromDay, toDay); err != nil {
		return nil, fmt.Errorf("usage of %s: %w", account, err)
	}
	var out []credits.Usage
	err := s.db.View(func(tx *bolt.Tx) error {
		ub := tx.Bucket([]byte(bucketUsage))
		prefix := account + "\x00"
		c := ub.Cursor()
		for k, v := c.Seek([]byte(prefix + fromDay)); k != nil; k, v = c.Next() {
			rest, ok := strings.CutPrefix(string(k), prefix)
			if !ok {
				break
			}
			day := rest[:min(len(rest), len(credits.DayLayout))]
			if toDay != "" && day > toDay {
				break
			}
			var u credits.Usage
			if err := json.Unmarshal(v, &u); err != nil {
				return fmt.Errorf("decode usage %q: %w", k, err)
			}
			out = append(out, u)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("usage of %s: %w", account, err)
	}
	return out, nil
}
