package chaos

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// Kind is what a [Record] says happened.
type Kind string

// The record kinds. Writers append Begun right before committing, then Committed or
// Unknown; or RolledBack, or Aborted, instead. A Begun without a later record means the
// writer died during the commit: its outcome is unknown. Listeners append Started when
// an attempt begins and Delivered before returning nil, or Failed.
const (
	Begun      Kind = "begun"      // writer: about to commit (outcome unknown until one of the next three)
	Committed  Kind = "committed"  // writer: commit returned nil
	Unknown    Kind = "unknown"    // writer: commit returned an error (outcome unknown)
	RolledBack Kind = "rolledback" // writer: rolled back on purpose
	Aborted    Kind = "aborted"    // writer: a statement failed before commit; rolled back
	Started    Kind = "started"    // listener: attempt began
	Delivered  Kind = "delivered"  // listener: about to return nil (written before returning)
	Failed     Kind = "failed"     // listener: about to return an error or panic (ends the attempt)

	// Harness records: Event holds a short description, not an event ID.
	Fault Kind = "fault" // a fault was injected; Node names the killed node, or is empty
	Down  Kind = "down"  // the database server is being stopped
	Up    Kind = "up"    // the database server accepts connections again
	// Claimed names an event (Event is its ID) whose claim a node held when a crash
	// point killed it (after-claim): the harness appends one per claimed event the moment
	// it sees the node exit, after the node's Fault record.
	Claimed Kind = "claimed"

	// Pause records: Event names a subscription, not an event. Paused: a Pause of it
	// returned nil (the pause is committed and holds from now on). Resuming: a Resume
	// of it begins (from now on the pause may be over). See CheckPause.
	Paused   Kind = "paused"
	Resuming Kind = "resuming"
)

// Record is one line of a [Log].
type Record struct {
	Kind  Kind      `json:"k"`
	Event string    `json:"e"`           // event ID
	Node  string    `json:"n,omitempty"` // node, writer or process name
	At    time.Time `json:"t"`           // wall clock, UTC, monotonic reading stripped
}

// Log is an append-only record file, one JSON object per line. Every Append is written
// and fsynced before it returns, so a record survives a SIGKILL of its process the
// moment Append returns. Concurrent appends share fsyncs (group commit): each returns
// once an fsync that started after its write has completed. A Log is safe for
// concurrent use.
type Log struct {
	mu              sync.Mutex
	cond            *sync.Cond
	f               *os.File
	written, synced uint64 // lines written; lines known to be on disk
	syncing         bool
	err             error // a failed write or fsync fails every append after it
}

// CreateLog creates the record file at path, or opens it for appending. When an earlier
// process was killed in the middle of a line, that torn line is cut off first, so the
// file stays one record per line.
func CreateLog(path string) (*Log, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	if err := cutTornLine(f); err != nil {
		f.Close()
		return nil, err
	}
	l := &Log{f: f}
	l.cond = sync.NewCond(&l.mu)
	return l, nil
}

// cutTornLine truncates f after its last newline.
func cutTornLine(f *os.File) error {
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return err
	}
	b, err := io.ReadAll(io.NewSectionReader(f, 0, st.Size()))
	if err != nil {
		return err
	}
	keep := int64(bytes.LastIndexByte(b, '\n') + 1)
	if keep == st.Size() {
		return nil
	}
	return f.Truncate(keep)
}

// Append writes r as one line and fsyncs it. A zero r.At is set to now.
func (l *Log) Append(r Record) error {
	if r.At.IsZero() {
		r.At = time.Now()
	}
	r.At = r.At.UTC().Round(0)
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return errors.New("chaos: append to a closed log")
	}
	if l.err != nil {
		return l.err
	}
	if _, err := l.f.Write(b); err != nil {
		l.err = err
		return err
	}
	l.written++
	mine := l.written
	for l.synced < mine && l.err == nil {
		if l.syncing {
			l.cond.Wait()
			continue
		}
		l.syncing = true
		upTo := l.written
		f := l.f
		l.mu.Unlock()
		err := f.Sync()
		l.mu.Lock()
		l.syncing = false
		if err != nil {
			l.err = err
		} else {
			l.synced = max(l.synced, upTo)
		}
		l.cond.Broadcast()
	}
	return l.err
}

// Close closes the file. Appending afterwards returns an error.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.syncing {
		l.cond.Wait()
	}
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

// ReadLogs reads the record files in order and returns their records. A missing file
// reads as empty. A last line without its newline (its process was killed mid-write)
// is dropped; such a record was never acknowledged, since Append had not returned. Any
// other malformed line is an error.
func ReadLogs(paths ...string) ([]Record, error) {
	var out []Record
	for _, p := range paths {
		f, err := os.Open(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		recs, err := readLog(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		out = append(out, recs...)
	}
	return out, nil
}

func readLog(r io.Reader) ([]Record, error) {
	var out []Record
	br := bufio.NewReader(r)
	for line := 1; ; line++ {
		b, err := br.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			return out, nil // b, if any, is a torn last line
		}
		if err != nil {
			return nil, err
		}
		b = bytes.TrimSpace(b)
		if len(b) == 0 {
			continue
		}
		var rec Record
		if err := json.Unmarshal(b, &rec); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		out = append(out, rec)
	}
}
