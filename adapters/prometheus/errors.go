package outboxprom

import "errors"

// Errors returned by [New] and [NewStatsCollector]. A registration conflict is returned
// wrapped as it comes from the registry: use errors.As with a
// *prometheus.AlreadyRegisteredError target to find the collector registered first.
var (
	// ErrNilRegisterer is returned by [New] when no registerer is given. The package never
	// falls back to prometheus.DefaultRegisterer.
	ErrNilRegisterer = errors.New("outboxprom: registerer is nil")
	// ErrNilSource is returned by [NewStatsCollector] when no statistics source is given.
	ErrNilSource = errors.New("outboxprom: stats source is nil")
	// ErrInvalidOptions is wrapped by the errors that report a bad [Options] or
	// [StatsOptions] field.
	ErrInvalidOptions = errors.New("outboxprom: invalid options")
)
