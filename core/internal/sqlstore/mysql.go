package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/outboxkit/outbox/core/outboxtype"
)

// MySQLDSNParams are the DSN parameters the [MySQL] dialect needs from
// github.com/go-sql-driver/mysql, to append to the DSN:
// "user:password@tcp(127.0.0.1:3306)/app?" + outbox.MySQLDSNParams.
const MySQLDSNParams = "parseTime=true&loc=UTC"

// mysqlCheckTimes are the instants the connection check sends: one in January and one
// in July, so that a loc with daylight saving time is off by its offset in at least one
// of them even where its standard offset is zero.
var mysqlCheckTimes = [...]time.Time{
	time.Date(2001, 1, 2, 3, 4, 5, 123456000, time.UTC),
	time.Date(2001, 7, 2, 3, 4, 5, 123456000, time.UTC),
}

// mysqlCheckQuery reads a time argument back twice: as DATETIME, which tells whether the
// driver parses times (parseTime), and as text formatted by the server, which shows the
// wall-clock time the driver sent (its loc). It also reads the connection's character
// sets and max_allowed_packet.
const mysqlCheckQuery = "SELECT CAST(? AS DATETIME(6)), DATE_FORMAT(CAST(? AS DATETIME(6)), '%Y-%m-%d %H:%i:%s.%f'), " +
	"@@character_set_client, @@character_set_connection, @@max_allowed_packet"

// mysqlPacketHeadroom is the part of max_allowed_packet kept for an event's columns
// other than the payload and the statement around them (see mysqlPacketNeed).
const mysqlPacketHeadroom = 64 << 10

// mysqlPacketNeed is the max_allowed_packet that an event with a payload of maxPayload
// bytes needs: the INSERT carries the payload in one packet, and the driver's
// client-side interpolation (interpolateParams=true) may escape every byte of it, so
// twice the payload, plus headroom for the other columns.
func mysqlPacketNeed(maxPayload int) int64 { return 2*int64(maxPayload) + mysqlPacketHeadroom }

// mysqlTextLayout is how DATE_FORMAT in mysqlCheckQuery prints a time.
const mysqlTextLayout = "2006-01-02 15:04:05.000000"

// checkMySQLConn is the [MySQL] dialect's connection check; see [SQLStore.CheckConnection].
func checkMySQLConn(ctx context.Context, db *sql.DB, maxPayload int) error {
	var maxPacket int64
	for _, want := range mysqlCheckTimes {
		var scanned any
		var text, csClient, csConn sql.NullString
		if err := db.QueryRowContext(ctx, mysqlCheckQuery, want, want).Scan(&scanned, &text, &csClient, &csConn, &maxPacket); err != nil {
			return fmt.Errorf("check mysql connection: %w", err)
		}
		t, ok := scanned.(time.Time)
		if !ok {
			return &outboxtype.ConfigError{Field: "DSN", Reason: fmt.Sprintf(
				"DATETIME values scan as %T, not time.Time: add parseTime=true to the MySQL DSN (outbox.MySQLDSNParams)", scanned)}
		}
		if t.Location() == time.Local {
			return &outboxtype.ConfigError{Field: "DSN", Reason: "the driver reads and writes times in loc=Local, the process's time zone: " +
				"set loc=UTC in the MySQL DSN (outbox.MySQLDSNParams)"}
		}
		if got := text.String; got != want.Format(mysqlTextLayout) || !t.Equal(want) {
			return &outboxtype.ConfigError{Field: "DSN", Reason: fmt.Sprintf(
				"the driver sends times in loc %s, not UTC (%s was stored as %q): set loc=UTC in the MySQL DSN (outbox.MySQLDSNParams)",
				t.Location(), want.Format(mysqlTextLayout), got)}
		}
		if csClient.String != "utf8mb4" || csConn.String != "utf8mb4" {
			return &outboxtype.ConfigError{Field: "DSN", Reason: fmt.Sprintf(
				"the connection character set is %s/%s, not utf8mb4: remove charset from the MySQL DSN or set charset=utf8mb4",
				csClient.String, csConn.String)}
		}
	}
	if need := mysqlPacketNeed(maxPayload); maxPayload > 0 && need > maxPacket {
		return &outboxtype.ConfigError{Field: "MaxPayloadBytes", Reason: fmt.Sprintf(
			"%d needs a server max_allowed_packet of at least %d (twice MaxPayloadBytes plus 64 KiB), but max_allowed_packet is %d: "+
				"lower MaxPayloadBytes to at most %d or raise max_allowed_packet", maxPayload, need, maxPacket,
			max(0, maxPacket-mysqlPacketHeadroom)/2)}
	}
	return nil
}
