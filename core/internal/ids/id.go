// Package ids makes the identifiers of the outbox: ULIDs (event IDs), node IDs and the
// claim tokens "<node ID>/<ULID>" that fence a claimed row's outcome.
package ids

import (
	"crypto/rand"
	"sync"
	"time"
)

// crockford is the ULID alphabet (Crockford's base32).
const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// idGenerator makes monotonic ULIDs: 48 bits of Unix milliseconds, then 80 random bits.
// Within one millisecond, or when the clock steps back, the random part of the previous
// ID is incremented, so IDs from one generator always sort in generation order.
type idGenerator struct {
	mu     sync.Mutex
	lastMs uint64
	rnd    [10]byte
}

// defaultIDs is the generator behind New. It holds no configuration, only the
// monotonicity state that must be shared by every writer in the process.
var defaultIDs idGenerator

// New returns a new ULID; IDs sort in creation order within this process (package
// outbox's NewID).
func New() string { return defaultIDs.next(time.Now()) }

// At returns a new ULID of the time now, from the same generator as New.
func At(now time.Time) string { return defaultIDs.next(now) }

func (g *idGenerator) next(now time.Time) string {
	ms := uint64(now.UnixMilli())
	g.mu.Lock()
	if ms > g.lastMs {
		g.lastMs = ms
		if _, err := rand.Read(g.rnd[:]); err != nil {
			// crypto/rand does not fail on supported platforms; keep monotonicity anyway.
			g.increment()
		}
		// Keep headroom so increments within the millisecond rarely carry into the time.
		g.rnd[0] &= 0x7f
	} else {
		g.increment()
	}
	var b [16]byte
	putUint48(b[:6], g.lastMs)
	copy(b[6:], g.rnd[:])
	g.mu.Unlock()
	return EncodeULID(b)
}

// increment adds one to the 80-bit random part; on overflow it moves to the next millisecond.
func (g *idGenerator) increment() {
	for i := len(g.rnd) - 1; i >= 0; i-- {
		g.rnd[i]++
		if g.rnd[i] != 0 {
			return
		}
	}
	g.lastMs++
}

func putUint48(b []byte, v uint64) {
	for i := 5; i >= 0; i-- {
		b[i] = byte(v)
		v >>= 8
	}
}

// EncodeULID writes 128 bits as 26 base32 characters, most significant first.
func EncodeULID(b [16]byte) string {
	var out [26]byte
	// 128 bits = 2 padding bits + 126 bits; the first character carries 3 bits.
	var acc uint64
	var bits uint
	pos := 25
	for i := 15; i >= 0; i-- {
		acc |= uint64(b[i]) << bits
		bits += 8
		for bits >= 5 && pos >= 0 {
			out[pos] = crockford[acc&31]
			acc >>= 5
			bits -= 5
			pos--
		}
	}
	if pos >= 0 {
		out[pos] = crockford[acc&31]
	}
	return string(out[:])
}
