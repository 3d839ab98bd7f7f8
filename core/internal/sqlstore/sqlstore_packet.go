package sqlstore

import (
	"context"
	"fmt"

	"github.com/outboxkit/outbox/core/outboxtype"
)

// The statement size limits of a server that refuses large packets ([MySQL]: a statement
// larger than max_allowed_packet is answered with error 1153 and a closed connection,
// which ends the caller's transaction and loses its business rows). The store reads the
// server's limit once, in the first write's transaction, and refuses an event whose row
// would exceed it before any SQL; a multi-row INSERT is split below it.

// packetQuery reads the connection's max_allowed_packet.
const packetQuery = "SELECT @@max_allowed_packet"

// checkPacket refuses events whose row the server would not take in one statement, with
// an error matching [ErrEventTooLarge]. On a dialect without a packet limit it does
// nothing. exec is the caller's: the one read it makes there, once per store, takes no
// lock, so the caller's transaction stays usable after a refusal.
func (s *Store) checkPacket(ctx context.Context, exec outboxtype.Executor, events []outboxtype.Event) error {
	if !s.d.packetLimited {
		return nil
	}
	packet := s.packet.Load()
	if packet == 0 {
		rows, err := exec.QueryContext(ctx, packetQuery)
		if err != nil {
			return fmt.Errorf("read max_allowed_packet: %w", err)
		}
		if rows.Next() {
			err = rows.Scan(&packet)
		}
		if err = firstErr(err, rows.Err(), rows.Close()); err != nil {
			return fmt.Errorf("read max_allowed_packet: %w", err)
		}
		if packet <= mysqlPacketHeadroom {
			return fmt.Errorf("read max_allowed_packet: %d bytes, less than the %d an event's columns need", packet, mysqlPacketHeadroom)
		}
		s.packet.Store(packet)
	}
	for i := range events {
		size, err := rowBytesBound(&events[i])
		if err != nil {
			return err
		}
		if need := rowPacketNeed(len(events[i].Payload), size); need > packet {
			return fmt.Errorf("%w: event %s is %d bytes (payload %d) and needs a max_allowed_packet of at least %d, "+
				"but the server's max_allowed_packet is %d: raise max_allowed_packet, or keep payloads at most %d bytes "+
				"(MaxPayloadBytes) and headers small",
				outboxtype.ErrEventTooLarge, events[i].ID, size, len(events[i].Payload), need, packet, max(0, packet-mysqlPacketHeadroom)/2)
		}
	}
	return nil
}

// stmtBytes returns the most argument bytes one multi-row INSERT may carry: the
// dialect's bound, and on a server with a packet limit that checkPacket has read, half
// of what the limit leaves for them (the driver may escape every byte).
func (s *Store) stmtBytes() int {
	if packet := s.packet.Load(); packet > mysqlPacketHeadroom {
		return int(min(int64(s.d.maxStatementBytes), (packet-mysqlPacketHeadroom)/2))
	}
	return s.d.maxStatementBytes
}

// rowPacketNeed is the max_allowed_packet that a row of size bytes, payload of them the
// payload, needs: as mysqlPacketNeed, twice the payload (the driver's client-side
// interpolation may escape every byte) plus the headroom, or, when the other columns
// take more than the headroom leaves for them, twice those plus the statement's text.
func rowPacketNeed(payload, size int) int64 {
	other := int64(size - payload)
	return 2*int64(payload) + max(mysqlPacketHeadroom, 2*other+mysqlStatementText)
}

// mysqlStatementText bounds the text of one event INSERT beside its arguments.
const mysqlStatementText = 4 << 10

// rowBytesBound returns insertRowSize of e's row without encoding its headers when an
// upper bound of their encoded size is small (JSON escapes a byte in at most six).
func rowBytesBound(e *outboxtype.Event) (int, error) {
	bound := 2
	for k, v := range e.Headers {
		bound += 6*(len(k)+len(v)) + 6
	}
	if bound <= mysqlPacketHeadroom/4 {
		return insertRowSize(*e, nil) + bound, nil
	}
	h, err := encodeHeaders(e.Headers)
	if err != nil {
		return 0, fmt.Errorf("event %s: %w", e.ID, err)
	}
	return insertRowSize(*e, h), nil
}

// firstErr returns the first non-nil error.
func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
