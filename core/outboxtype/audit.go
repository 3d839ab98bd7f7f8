package outboxtype

import (
	"fmt"
	"time"
)

// The actions of the audit trail.
const (
	AuditReplay    = "replay"     // DEAD events replayed by ID
	AuditReplayAll = "replay-all" // DEAD events replayed by filter
	AuditDelete    = "delete"     // DEAD events deleted
	AuditDiscard   = "discard"    // events discarded
	AuditPause     = "pause"      // a subscription paused (Target: its name)
	AuditResume    = "resume"     // a subscription resumed (Target: its name)
)

// AuditEntry is one row of the audit trail: a change made through outbox.Events.
type AuditEntry struct {
	ID     string    // a ULID: entries sort by time
	At     time.Time // when the change finished
	Actor  string    // who made it ([WithActor]); "unknown" when nobody was named
	Action string    // AuditReplay, AuditReplayAll, AuditDelete, AuditDiscard, AuditPause or AuditResume
	Target string    // the event IDs, comma-separated, the filter, or the subscription
	Count  int64     // how many events it changed (a pause or resume: 1, or 0 when it changed nothing)
}

// AuditError is the error of a change of outbox.Events whose audit entry could not be
// written; errors.As finds it.
type AuditError struct {
	// Action is the change: AuditReplay, AuditReplayAll, AuditDelete, AuditDiscard,
	// AuditPause or AuditResume.
	Action string
	// Recorded is how many events a replay-all changed, and recorded, in the batches
	// before the one whose entry failed.
	Recorded int64
	// Unrecorded is how many events the change made that the trail lacks: always 0 with
	// an storage.AuditedStore, which rolls the change back with its entry.
	Unrecorded int64
	// Reason says why without internal details, fit to show an operator: "the audit
	// table does not exist", "no permission to write the audit table" or "a database
	// error".
	Reason string
	// Err is the store's error.
	Err error
}

// Error implements error.
func (e *AuditError) Error() string {
	msg := "outbox: " + e.Action + ": the audit trail could not be written (" + e.Reason + "): " + fmt.Sprint(e.Err)
	if e.Unrecorded > 0 {
		return msg + fmt.Sprintf("; %d events were changed and are not recorded", e.Unrecorded)
	}
	if e.Recorded > 0 {
		return msg + fmt.Sprintf("; %d events were changed and recorded before, the rest were not changed", e.Recorded)
	}
	return msg + "; nothing was changed"
}

// Unwrap returns the store's error.
func (e *AuditError) Unwrap() error { return e.Err }

// Pause is a paused subscription (outbox.Events.Pause): its events stay pending on
// every process of the table until it is resumed.
type Pause struct {
	Listener string    // the subscription's name
	At       time.Time // when it was paused, by the database clock
	Actor    string    // who paused it ([WithActor]); "unknown" when nobody was named
	Reason   string    // why, as given to Pause; may be empty
}
