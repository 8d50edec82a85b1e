package dynamostream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// FileCheckpoints keeps one stream's positions in a JSON file at Path,
// for a reader in one process (`genway serve`'s data directory): a Save
// writes a new file and renames it over the old one, so that a crash
// leaves the previous positions or the new ones, never a mix. Positions
// saved for another stream (a table made again) are not loaded. Safe for
// concurrent use by one process's readers.
type FileCheckpoints struct {
	Path string
}

var _ Checkpoints = FileCheckpoints{}

// checkpointFile is the file's content.
type checkpointFile struct {
	Stream string              `json:"stream"`
	Shards map[string]Position `json:"shards"`
}

// Load implements Checkpoints: no file, or a file of another stream, is no
// positions.
func (f FileCheckpoints) Load(_ context.Context, streamARN string) (map[string]Position, error) {
	b, err := os.ReadFile(f.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load stream checkpoint: %w", err)
	}
	var c checkpointFile
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("load stream checkpoint %s: %w", f.Path, err)
	}
	if c.Stream != streamARN {
		return nil, nil
	}
	return c.Shards, nil
}

// Save implements Checkpoints: the file is written whole (mode 0600),
// synced and renamed over the previous one.
func (f FileCheckpoints) Save(_ context.Context, streamARN string, positions map[string]Position) error {
	b, err := json.Marshal(checkpointFile{Stream: streamARN, Shards: positions})
	if err != nil {
		return fmt.Errorf("save stream checkpoint: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(f.Path), filepath.Base(f.Path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("save stream checkpoint: %w", err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename, there is nothing to remove
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("save stream checkpoint: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("save stream checkpoint: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("save stream checkpoint: %w", err)
	}
	if err := os.Rename(tmp.Name(), f.Path); err != nil {
		return fmt.Errorf("save stream checkpoint: %w", err)
	}
	return nil
}
