package ids

import "time"

// TimePrefixLen is the length of a ULID's time part: 10 characters of base32 holding
// its 48-bit Unix millisecond.
const TimePrefixLen = 10

// TimePrefix returns the time part of a ULID made at t (t's Unix millisecond, at least
// 0). Every ULID made at t or later sorts at or after TimePrefix(t) followed by 16 '0',
// the lowest ULID of that millisecond, and every ULID made earlier sorts before it.
func TimePrefix(t time.Time) string {
	ms := max(t.UnixMilli(), 0)
	var out [TimePrefixLen]byte
	for i := TimePrefixLen - 1; i >= 0; i-- {
		out[i] = crockford[ms&31]
		ms >>= 5
	}
	return string(out[:])
}

// Time returns the millisecond that id's time part encodes, or false when id does not
// start with a ULID's time part (10 upper-case base32 characters, the first 0 to 7).
// The rest of id is not looked at: a fan-out delivery's ID, "<ULID>.<hash>", has the
// time of its event.
func Time(id string) (time.Time, bool) {
	if len(id) < TimePrefixLen || id[0] > '7' {
		return time.Time{}, false
	}
	var ms int64
	for i := range TimePrefixLen {
		v := decodeChar(id[i])
		if v < 0 {
			return time.Time{}, false
		}
		ms = ms<<5 | int64(v)
	}
	return time.UnixMilli(ms).UTC(), true
}

// decodeChar returns the value of an upper-case Crockford base32 character, or -1.
func decodeChar(c byte) int {
	for i := range len(crockford) {
		if crockford[i] == c {
			return i
		}
	}
	return -1
}
