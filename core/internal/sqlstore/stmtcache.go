package sqlstore

import (
	"container/list"
	"context"
	"database/sql"
	"sync"

	"github.com/outboxkit/outbox/core/outboxtype"
)

// Prepared statements, kept across calls where the driver would otherwise prepare every
// statement anew (dialect.cachedStatements). On modernc.org/sqlite parsing took about
// a fifth of an event's write and a quarter of an ordered one's in CPU profiles of W1
// and W1o; go-sql-driver/mysql prepares a statement with arguments on the server and
// closes it after one use, a round trip more per statement. PostgreSQL's pgx keeps its
// own statement cache.
//
// A statement is prepared on the store's *sql.DB (database/sql then keeps one driver
// statement per connection it ran on) and used in the caller's transaction through
// Tx.StmtContext, which reuses the driver statement of the transaction's connection.
// Preparing on the DB needs a free connection: a transaction that holds the only one
// (SQLite's pool of one) would wait for itself. So a statement is prepared only by the
// store's own calls outside transactions; a transaction that runs a statement not yet
// prepared runs it unprepared and leaves its text for the next such call to prepare.
// Only a [Tx] begun on the store's own *sql.DB uses the cache in a transaction.

// maxCachedArgs: statements with more arguments (multi-row INSERTs, long ID lists),
// whose text changes with their size, are not kept, so that they do not push out the
// small statements that repeat. PostgreSQL's event INSERT passes its rows as arrays
// (insertArrayQueries), within this bound at any batch size.
const maxCachedArgs = 64

// maxWantedStmts bounds the texts waiting to be prepared.
const maxWantedStmts = 16

type stmtCache struct {
	db   *sql.DB
	size int // the most statements kept; the least recently used is closed

	mu     sync.Mutex
	byText map[string]*list.Element // of *cachedStmt
	lru    list.List                // front: most recently used
	wanted map[string]struct{}
}

type cachedStmt struct {
	text    string
	stmt    *sql.Stmt
	uses    int  // callers between get and the statement's start; guarded by mu
	evicted bool // out of the cache: closed when uses falls to 0
}

func newStmtCache(db *sql.DB, size int) *stmtCache {
	return &stmtCache{db: db, size: size, byText: make(map[string]*list.Element), wanted: make(map[string]struct{})}
}

// get returns the prepared statement for text, or nil; the caller releases a statement
// once the statement has started (a query's rows keep it open on their own). Outside a
// transaction (canPrepare) it prepares it, and the texts transactions left, when
// missing; in one it leaves text for the next call outside.
func (c *stmtCache) get(ctx context.Context, text string, nargs int, canPrepare bool) *cachedStmt {
	if nargs > maxCachedArgs {
		return nil
	}
	c.mu.Lock()
	var got *cachedStmt
	if el, ok := c.byText[text]; ok {
		c.lru.MoveToFront(el)
		got = el.Value.(*cachedStmt)
		got.uses++
	}
	if !canPrepare {
		if got == nil && len(c.wanted) < maxWantedStmts {
			c.wanted[text] = struct{}{}
		}
		c.mu.Unlock()
		return got
	}
	delete(c.wanted, text) // prepared below, once: put counts the caller's use once
	others := len(c.wanted) > 0
	c.mu.Unlock()
	if others {
		c.prepareWanted(ctx)
	}
	if got == nil {
		// Prepared without the lock: a preparation waits for a connection, which a
		// transaction asking for a statement (under the lock) may hold.
		if p, err := c.db.PrepareContext(ctx, text); err == nil {
			got = c.put(text, p, true)
		} // else run unprepared; the error, if it is the statement's, comes from there
	}
	return got
}

// prepareWanted prepares the texts transactions left (get), for a caller outside any
// transaction that runs none of the cached statements itself: the store's own
// transactions on MySQL (beginReadCommitted) are such callers, and in MultiNode mode,
// where the poller claims in a transaction and the hot path leaves nothing to poll,
// they may be the only calls the store makes outside the writers' transactions.
func (c *stmtCache) prepareWanted(ctx context.Context) {
	c.mu.Lock()
	if len(c.wanted) == 0 {
		c.mu.Unlock()
		return
	}
	texts := make([]string, 0, len(c.wanted))
	for w := range c.wanted {
		if _, ok := c.byText[w]; !ok {
			texts = append(texts, w)
		}
	}
	clear(c.wanted)
	c.mu.Unlock()
	for _, t := range texts {
		// Prepared without the lock, as in get.
		if p, err := c.db.PrepareContext(ctx, t); err == nil {
			c.put(t, p, false)
		}
	}
}

// put keeps p for text and returns the statement kept (another call may have kept one
// first), in use by the caller when use is set; it closes what it does not keep.
func (c *stmtCache) put(text string, p *sql.Stmt, use bool) *cachedStmt {
	var closing []*sql.Stmt
	c.mu.Lock()
	el, ok := c.byText[text]
	if ok {
		c.lru.MoveToFront(el)
		closing = append(closing, p)
	} else {
		el = c.lru.PushFront(&cachedStmt{text: text, stmt: p})
		c.byText[text] = el
	}
	cs := el.Value.(*cachedStmt)
	if use {
		cs.uses++
	}
	for c.lru.Len() > c.size {
		old := c.lru.Back()
		c.lru.Remove(old)
		o := old.Value.(*cachedStmt)
		delete(c.byText, o.text)
		o.evicted = true
		if o.uses == 0 {
			closing = append(closing, o.stmt)
		}
	}
	c.mu.Unlock()
	for _, s := range closing {
		s.Close() // database/sql finalizes it once the transactions and rows using it end
	}
	return cs
}

// release ends the caller's use of cs, closing it if it was evicted meanwhile.
func (c *stmtCache) release(cs *cachedStmt) {
	c.mu.Lock()
	cs.uses--
	closing := cs.evicted && cs.uses == 0
	c.mu.Unlock()
	if closing {
		cs.stmt.Close()
	}
}

// stmtExec runs statements through the cache: on the store's DB (tx nil), or in tx.
type stmtExec struct {
	c  *stmtCache
	tx *sql.Tx
}

// stmt returns the statement to run text with, or nil, and the function that releases
// it once it has started.
func (e stmtExec) stmt(ctx context.Context, text string, nargs int) (*sql.Stmt, func()) {
	cs := e.c.get(ctx, text, nargs, e.tx == nil)
	if cs == nil {
		return nil, nil
	}
	st := cs.stmt
	if e.tx != nil {
		st = e.tx.StmtContext(ctx, st) // the driver statement of the transaction's connection
	}
	return st, func() { e.c.release(cs) }
}

func (e stmtExec) ExecContext(ctx context.Context, text string, args ...any) (sql.Result, error) {
	if st, release := e.stmt(ctx, text, len(args)); st != nil {
		defer release()
		return st.ExecContext(ctx, args...)
	}
	if e.tx != nil {
		return e.tx.ExecContext(ctx, text, args...)
	}
	return e.c.db.ExecContext(ctx, text, args...)
}

func (e stmtExec) QueryContext(ctx context.Context, text string, args ...any) (*sql.Rows, error) {
	if st, release := e.stmt(ctx, text, len(args)); st != nil {
		defer release()
		return st.QueryContext(ctx, args...)
	}
	if e.tx != nil {
		return e.tx.QueryContext(ctx, text, args...)
	}
	return e.c.db.QueryContext(ctx, text, args...)
}

// on returns exec, or an executor that runs its statements through the store's
// statement cache where that is possible: exec is the store's DB, or a [Tx] begun on it.
func (s *Store) on(exec outboxtype.Executor) outboxtype.Executor {
	if s.stmts == nil {
		return exec
	}
	switch x := exec.(type) {
	case *sql.DB:
		if x == s.db {
			return stmtExec{c: s.stmts}
		}
	default:
		if s.txOf == nil {
			break
		}
		if db, tx, ok := s.txOf(exec); ok && db == s.db {
			return stmtExec{c: s.stmts, tx: tx}
		}
	}
	return exec
}
