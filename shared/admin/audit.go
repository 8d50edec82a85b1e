package admin

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"
)

// AuditEntry is one operator action: who did what to which, when. Every
// action that changes something (a key made or revoked, credits granted,
// a rate limit set, an account made, a job cancelled) writes one; the
// console shows them.
type AuditEntry struct {
	ID     string `json:"id"`     // time-ordered: "<unix nanoseconds, 20 digits>-<random>"
	At     int64  `json:"at"`     // Unix seconds
	Actor  string `json:"actor"`  // "console", "token", "cli" (the data directory's owner), with a session id where there is one
	Action string `json:"action"` // e.g. "keys.create", "credits.grant"
	Target string `json:"target"` // the account, key prefix or job id acted on
	Detail string `json:"detail,omitempty"`
}

// NewAuditEntry returns an entry at now with a fresh, time-ordered id.
func NewAuditEntry(now time.Time, actor, action, target, detail string) AuditEntry {
	var r [6]byte
	rand.Read(r[:])
	return AuditEntry{ID: fmt.Sprintf("%020d-%s", now.UnixNano(), hex.EncodeToString(r[:])),
		At: now.Unix(), Actor: actor, Action: action, Target: target, Detail: detail}
}

// AuditStore keeps the audit log. Implementations are safe for concurrent
// use.
type AuditStore interface {
	// AddAudit appends e.
	AddAudit(ctx context.Context, e AuditEntry) error
	// Audit returns up to limit entries, newest first, older than the
	// entry id before ("" for the newest).
	Audit(ctx context.Context, before string, limit int) ([]AuditEntry, error)
}

type actorKey struct{}

// WithActor returns ctx naming who acts, for the audit log.
func WithActor(ctx context.Context, actor string) context.Context {
	return context.WithValue(ctx, actorKey{}, actor)
}

// Actor returns who acts in ctx: what WithActor set, or "cli" (a command
// run on the server's data directory or socket, by its owner).
func Actor(ctx context.Context) string {
	if a, ok := ctx.Value(actorKey{}).(string); ok && a != "" {
		return a
	}
	return "cli"
}
