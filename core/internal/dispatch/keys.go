package dispatch

// EventKeys returns the distinct order keys of events, nil when none is ordered.
func EventKeys(events []Event) []string {
	return DistinctKeys(len(events), func(i int) string { return events[i].OrderKey })
}

// DistinctKeys returns the distinct non-empty keys key(0) … key(n-1) in order, nil when
// there is none; it allocates nothing then.
func DistinctKeys(n int, key func(i int) string) []string {
	var keys []string
	var seen map[string]bool
	for i := range n {
		k := key(i)
		if k == "" || seen[k] {
			continue
		}
		if seen == nil {
			seen = map[string]bool{}
		}
		seen[k] = true
		keys = append(keys, k)
	}
	return keys
}

// WaitingKeys returns the keys whose events the store inserted WAITING only (the key
// had events before them): they move on by a promote after commit.
func WaitingKeys(events []Event, keys []string) map[string]bool {
	head := make(map[string]bool, len(keys)) // keys with an event inserted NEW
	for i := range events {
		if events[i].OrderKey != "" && events[i].Status != StatusWaiting {
			head[events[i].OrderKey] = true
		}
	}
	var out map[string]bool
	for _, k := range keys {
		if !head[k] {
			if out == nil {
				out = map[string]bool{}
			}
			out[k] = true
		}
	}
	return out
}
