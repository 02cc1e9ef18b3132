package sqlite

import (
	"context"
	"database/sql"
	"sync/atomic"
	"time"
)

// Checkpoints off the commit path.
//
// In WAL mode a commit appends pages to the log, and a checkpoint copies them into the database
// file and flushes it. SQLite runs the checkpoint inside the commit that crosses
// wal_autocheckpoint pages: with latch's twenty-odd pages a call, that commit takes some 30 ms
// and every call queued behind it waits as long. The checkpointer does the copying in the
// background instead, on its own connection, with PASSIVE checkpoints, which take no lock a
// writer needs: commits go on meanwhile. The writer's own automatic checkpoint stays as the
// backstop (a PASSIVE checkpoint cannot finish while commits keep appending, and only a finished
// one lets the log start over); it then finds almost nothing left to copy.

// checkpointEvery is how long the checkpointer lets commits gather before it copies them: each
// checkpoint flushes the database file once, whatever it copies.
const checkpointEvery = 20 * time.Millisecond

// The log starts over only at a commit that finds it copied whole, which a checkpointer running
// beside a steady writer never leaves: without help the log grows to wal_autocheckpoint pages,
// and the commit that crosses it copies everything since the checkpointer's last pass and
// flushes the log and the database while every caller waits — milliseconds, once every few
// hundred calls. So once the log is restartFrames long, the checkpointer copies it pass after
// pass (at most restartPasses) until what is left is at most restartTail frames, and the
// writer's own checkpoint after its next commit copies those and lets the log start over.
const (
	restartFrames = walCheckpointPages * 8 / 10
	restartPasses = 4
	restartTail   = 256
)

// checkpointer runs PASSIVE checkpoints after commits, at most one per checkpointEvery.
type checkpointer struct {
	db      *sql.DB
	restart atomic.Bool   // the log is long and copied all but its last commits: the writer may start it over
	kick    chan struct{} // a commit happened; capacity 1
	stop    chan struct{}
	done    chan struct{}
}

// startCheckpointer opens the checkpointer's connection to loc (with the store's synchronous
// setting: a checkpoint's flush of the database is what makes the log reusable) and starts it.
func startCheckpointer(loc location) (*checkpointer, error) {
	db, err := sql.Open("sqlite", dsn(loc.path, "_pragma=busy_timeout(0)", "_pragma=synchronous("+loc.synchronous+")"))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	c := &checkpointer{db: db, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go c.run()
	return c, nil
}

// restartDue reports, once, that the checkpointer has copied a long log all but its last
// commits: a checkpoint on the writer's connection now copies those, and the next commit starts
// the log over.
func (c *checkpointer) restartDue() bool {
	return c != nil && c.restart.CompareAndSwap(true, false)
}

// committed tells the checkpointer that a commit appended to the log. It never blocks.
func (c *checkpointer) committed() {
	if c == nil {
		return
	}
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (c *checkpointer) run() {
	defer close(c.done)
	t := time.NewTimer(0)
	<-t.C
	for {
		select {
		case <-c.stop:
			return
		case <-c.kick:
		}
		t.Reset(checkpointEvery)
		select {
		case <-c.stop:
			t.Stop()
			return
		case <-t.C:
		}
		// A checkpoint that fails (another connection is checkpointing, a reader holds the
		// log) is simply tried again after the next commit: the writer's own checkpoint backs
		// it up, so there is nothing to report.
		c.pass(context.Background())
	}
}

// pass copies the log into the database. Once the log has grown past restartFrames it copies
// again at once, each pass copying what was committed during the one before (less each time),
// until a pass finds at most restartTail frames to copy: then it asks the writer to start the
// log over.
func (c *checkpointer) pass(ctx context.Context) {
	last := -1
	for range restartPasses {
		var busy, logged, copied int
		err := c.db.QueryRowContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &logged, &copied)
		// A checkpoint that fails (another connection is checkpointing, a reader holds the
		// log) is simply tried again after the next commit: the writer's own checkpoint backs
		// it up, so there is nothing to report.
		if err != nil || busy != 0 || copied != logged || logged < restartFrames {
			return
		}
		if last >= 0 && logged-last <= restartTail {
			c.restart.Store(true)
			return
		}
		last = logged
	}
}

// close stops the checkpointer and closes its connection.
func (c *checkpointer) close() error {
	if c == nil {
		return nil
	}
	close(c.stop)
	<-c.done
	return c.db.Close()
}
