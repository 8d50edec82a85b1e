package jobs

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/auth"
)

// Listing bounds.
const (
	// DefaultListLimit is a page's size when ListQuery.Limit is 0.
	DefaultListLimit = 20
	// MaxListLimit is the largest page.
	MaxListLimit = 100
	// maxModelFilter bounds ListQuery.Model.
	maxModelFilter = 200
)

// ListQuery selects jobs for Store.List. Zero fields select everything.
type ListQuery struct {
	// Account whose jobs are listed; "" lists every account's (for the
	// operator; the API always sets it to the caller's).
	Account string
	// Key, if set, lists only the jobs that key created (Job.Key): what
	// Service.List sets for a key limited to its own jobs.
	Key    string
	Status Status // "" or one of the statuses
	Type   string // "" or TypeMusic, TypeSFX, TypeVideo
	Model  string // "" or a catalog model id
	// Since and Until bound Created (Unix seconds, both inclusive); 0 is
	// no bound.
	Since, Until int64
	// Cursor is the next cursor of the previous page ("" for the first).
	Cursor string
	// Limit is the page size, 1..MaxListLimit; 0 is DefaultListLimit.
	Limit int
	// Ascending lists oldest first (Created ascending, then ID
	// ascending) instead of newest first; a cursor then continues
	// strictly after its position in that order (newer jobs).
	Ascending bool
}

// Normalize checks q and applies the default limit. Errors are
// *apierr.Error naming the API's query parameter (status, type, model,
// since, until, limit, after).
func (q *ListQuery) Normalize() error {
	switch q.Status {
	case "", Queued, Processing, Completed, Failed:
	default:
		return apierr.Invalidf("status", "invalid_value", "status must be one of queued, processing, completed, failed; got %q.", q.Status)
	}
	switch q.Type {
	case "", TypeMusic, TypeSFX, TypeVideo:
	default:
		return apierr.Invalidf("type", "invalid_value", "type must be one of music, sfx, video; got %q.", q.Type)
	}
	if len(q.Model) > maxModelFilter {
		return apierr.Invalidf("model", "invalid_value", "model must be at most %d characters.", maxModelFilter)
	}
	if q.Since < 0 {
		return apierr.Invalidf("since", "invalid_value", "since must be a Unix time in seconds (0 or more).")
	}
	if q.Until < 0 {
		return apierr.Invalidf("until", "invalid_value", "until must be a Unix time in seconds (0 or more).")
	}
	if q.Until != 0 && q.Until < q.Since {
		return apierr.Invalidf("until", "invalid_value", "until (%d) must not be before since (%d).", q.Until, q.Since)
	}
	switch {
	case q.Limit == 0:
		q.Limit = DefaultListLimit
	case q.Limit < 1 || q.Limit > MaxListLimit:
		return apierr.Invalidf("limit", "invalid_value", "limit must be between 1 and %d; got %d.", MaxListLimit, q.Limit)
	}
	if _, err := DecodeCursor(q.Cursor); err != nil {
		return err
	}
	return nil
}

// Match reports whether j passes q's filters (not its cursor or limit).
func (q *ListQuery) Match(j *Job) bool {
	return (q.Account == "" || j.Account == q.Account) && (q.Key == "" || j.Key == q.Key) &&
		q.MatchFields(j.Status, j.Type, j.Model, j.Created)
}

// MatchFields is Match on a job's indexed fields.
func (q *ListQuery) MatchFields(status Status, typ, model string, created int64) bool {
	return (q.Status == "" || status == q.Status) &&
		(q.Type == "" || typ == q.Type) &&
		(q.Model == "" || model == q.Model) &&
		(q.Since == 0 || created >= q.Since) &&
		(q.Until == 0 || created <= q.Until)
}

// Cursor is a position in the order of a listing: the next page holds
// the jobs strictly after it (newest first: older, or as old with a
// smaller id; ascending: newer, or as old with a greater id). The same
// position serves both orders.
type Cursor struct {
	Created int64  `json:"c"`
	ID      string `json:"i"`
}

// After reports whether the job (created, id) comes after c in the
// newest-first order, that is on a page after c.
func (c Cursor) After(created int64, id string) bool {
	return created < c.Created || (created == c.Created && id < c.ID)
}

// Before reports whether the job (created, id) comes before c in the
// newest-first order, that is on a page after c in the ascending order.
func (c Cursor) Before(created int64, id string) bool {
	return created > c.Created || (created == c.Created && id > c.ID)
}

// CursorOf returns the cursor just after j.
func CursorOf(j *Job) Cursor { return Cursor{Created: j.Created, ID: j.ID} }

// Encode returns c as an opaque string: base64url of its JSON.
func (c Cursor) Encode() string {
	b, _ := json.Marshal(c) // cannot fail: an int and a string
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodeCursor parses an Encode'd cursor; "" is the zero Cursor (the first
// page). A malformed one is a 400 naming "after".
func DecodeCursor(s string) (Cursor, error) {
	if s == "" {
		return Cursor{}, nil
	}
	bad := apierr.Invalidf("after", "invalid_value", "after must be the next_cursor of a previous page.")
	if len(s) > 512 {
		return Cursor{}, bad
	}
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
	if err != nil {
		return Cursor{}, bad
	}
	var c Cursor
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil || c.Created < 0 || c.ID == "" {
		return Cursor{}, bad
	}
	return c, nil
}

// IsZero reports whether c is the first page's (no position).
func (c Cursor) IsZero() bool { return c == Cursor{} }

// List returns a page of account's jobs that q selects (q.Account is set
// to account: the API never lists another account's jobs; q.Key to the
// caller's key when it may see only its own jobs), newest first, and the
// cursor of the next page ("" if none). Errors are *apierr.Error for a
// bad q.
func (s *Service) List(ctx context.Context, account string, q ListQuery) ([]*Job, string, error) {
	if account == "" {
		return nil, "", fmt.Errorf("list jobs: no account")
	}
	q.Account = account
	q.Key = auth.OwnJobsKey(ctx) // a key limited to its own jobs lists those only
	return s.ListAny(ctx, q)
}

// ListAny is List for the operator: q.Account "" lists every account's
// jobs, any other value that account's.
func (s *Service) ListAny(ctx context.Context, q ListQuery) ([]*Job, string, error) {
	if err := q.Normalize(); err != nil {
		return nil, "", err
	}
	js, next, err := s.Store.List(ctx, q)
	if err != nil {
		if e := apierr.As(err); e != nil {
			return nil, "", e
		}
		return nil, "", fmt.Errorf("list jobs: %w", err)
	}
	return js, next, nil
}

// CursorAt returns the cursor of the position of account's job id in a
// listing (its next page holds the jobs after it, in either order): the
// `after` of GET /v1/videos is a job id. The job may have been deleted
// since (it keeps its place). An id that is malformed, unknown or
// another account's is a 400 naming "after".
func (s *Service) CursorAt(ctx context.Context, account, id string) (string, error) {
	bad := apierr.Invalidf("after", "invalid_value", "after must be an id of yours from a previous page (its last_id); got %q.", id)
	if !ValidID(id) {
		return "", bad
	}
	j, err := s.Store.Get(ctx, id)
	switch {
	case errors.Is(err, ErrNotFound):
		return "", bad
	case err != nil:
		return "", fmt.Errorf("list position of job %s: %w", id, err)
	case j.Account != account, !auth.CanSeeJob(ctx, j.Key):
		return "", bad
	}
	return CursorOf(j).Encode(), nil
}

// GetAny returns the job with id, whatever its account (for the
// operator), or ErrNotFound.
func (s *Service) GetAny(ctx context.Context, id string) (*Job, error) {
	if !ValidID(id) {
		return nil, ErrNotFound
	}
	return s.Store.Get(ctx, id)
}

// CancelAny cancels the job with id on behalf of its account (for the
// operator); see Cancel.
func (s *Service) CancelAny(ctx context.Context, id string) (*Job, error) {
	j, err := s.GetAny(ctx, id)
	if err != nil {
		return nil, err
	}
	return s.Cancel(ctx, j.Account, id)
}
