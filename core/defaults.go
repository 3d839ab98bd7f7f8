package outbox

import "time"

// Defaults: a zero field of [Config] takes the value here.
const (
	DefaultWorkers         = 4                      // concurrent deliveries
	DefaultHotQueueSize    = 1000                   // committed events waiting for a worker
	DefaultColdQueueSize   = 1000                   // polled events waiting for a worker
	DefaultMaxAttempts     = 10                     // failed attempts before an event is DEAD
	DefaultRetryBase       = 200 * time.Millisecond // first delay of ExponentialBackoff
	DefaultRetryMax        = 60 * time.Second       // ExponentialBackoff's cap, before jitter
	DefaultListenerTimeout = 30 * time.Second       // one delivery attempt
	DefaultStatusTimeout   = 10 * time.Second       // one statement recording an outcome
	DefaultDoneBatchWindow = 2 * time.Millisecond   // DONE outcomes wait for more to share one statement
	DefaultPollInterval    = 5 * time.Second        // between two poll cycles
	DefaultPollMaxInterval = 30 * time.Second       // between two cycles of an idle poller
	DefaultPollBatchSize   = 100                    // rows one poll query reads
	DefaultSkipRecent      = time.Second            // the poller leaves younger rows to the hot path
	DefaultPurgeInterval   = time.Hour              // between two purges
	DefaultRetention       = 7 * 24 * time.Hour     // DONE, DEAD, FALLBACK and DISCARDED rows kept this long
	DefaultPurgeBatchSize  = 500                    // rows one purge statement deletes
	DefaultMaxPayloadBytes = 1 << 20                // 1 MiB, an encoded payload
	DefaultBatchSize       = 100                    // events per BatchListener.HandleBatch call
	DefaultTable           = "outbox_event"         // the outbox table
	DefaultLeaseTTL        = 30 * time.Second       // the dispatch lease, unrenewed
)
