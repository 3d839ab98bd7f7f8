package sqlstore

// DefaultTable is the outbox table of package outbox's Config.Table default; the tests
// of this package use it too.
const DefaultTable = "outbox_event"
