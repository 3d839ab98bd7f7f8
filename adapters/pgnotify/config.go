package pgnotify

import (
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	outbox "github.com/outboxkit/outbox/core"
)

// maxChannelLen is the longest channel name PostgreSQL accepts, in bytes (NAMEDATALEN - 1).
const maxChannelLen = 63

// The application_name of the connections, unless the DSN sets one.
const (
	notifyAppName = "outbox-pgnotify-notify"
	listenAppName = "outbox-pgnotify-listen"
)

// Config configures a [Notifier]. Only DSN is required.
type Config struct {
	// DSN is a PostgreSQL connection string (pgx syntax: URL or key=value). Notify uses
	// it, and Listen too unless ListenDSN is set. Required.
	DSN string
	// ListenDSN, when set, is used for LISTEN instead of DSN: point it at the server (or
	// a session-mode pooler) when DSN goes through a pooler in transaction mode
	// (PgBouncer's default), where LISTEN does not work. NOTIFY works through any
	// pooler. Defaults to DSN.
	ListenDSN string
	// Channel is the notification channel, at most 63 bytes. Processes that share a
	// table must use the same channel; use one channel per table. Defaults to
	// outbox.DefaultTable, the default table's name.
	Channel string
}

// New validates cfg and returns a Notifier; it connects nothing (the connections open on
// first use). It returns an [*outbox.ConfigError] (matching outbox.ErrInvalidConfig)
// when DSN is empty, when DSN or ListenDSN does not parse, or when Channel is longer
// than 63 bytes or holds a NUL byte.
func New(cfg Config) (*Notifier, error) {
	if cfg.DSN == "" {
		return nil, &outbox.ConfigError{Field: "pgnotify.Config.DSN", Reason: "is required"}
	}
	notifyCfg, err := parse("DSN", cfg.DSN, notifyAppName)
	if err != nil {
		return nil, err
	}
	// One round trip with an unnamed statement: no prepared statement that a pooler in
	// transaction mode could lose between two notifications.
	notifyCfg.DefaultQueryExecMode = pgx.QueryExecModeExec
	listenField, listenDSN := "DSN", cfg.DSN
	if cfg.ListenDSN != "" {
		listenField, listenDSN = "ListenDSN", cfg.ListenDSN
	}
	listenCfg, err := parse(listenField, listenDSN, listenAppName)
	if err != nil {
		return nil, err
	}
	channel := cfg.Channel
	if channel == "" {
		channel = outbox.DefaultTable
	}
	switch {
	case len(channel) > maxChannelLen:
		return nil, &outbox.ConfigError{Field: "pgnotify.Config.Channel",
			Reason: fmt.Sprintf("is %d bytes, PostgreSQL allows at most %d", len(channel), maxChannelLen)}
	case strings.IndexByte(channel, 0) >= 0:
		return nil, &outbox.ConfigError{Field: "pgnotify.Config.Channel", Reason: "holds a NUL byte"}
	}
	return &Notifier{
		notifyCfg: notifyCfg,
		listenCfg: listenCfg,
		channel:   channel,
		listenSQL: "LISTEN " + pgx.Identifier{channel}.Sanitize(),
	}, nil
}

// parse parses dsn, the field field of Config, and sets application_name to appName
// unless dsn sets it.
func parse(field, dsn, appName string) (*pgx.ConnConfig, error) {
	c, err := pgx.ParseConfig(dsn)
	if err != nil {
		// pgx redacts the password in its message.
		return nil, &outbox.ConfigError{Field: "pgnotify.Config." + field, Reason: err.Error()}
	}
	if _, ok := c.RuntimeParams["application_name"]; !ok {
		c.RuntimeParams["application_name"] = appName
	}
	return c, nil
}
