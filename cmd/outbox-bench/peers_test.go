package main

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

func TestDoneCounterWait(t *testing.T) {
	t.Parallel()
	t.Run("all arrive", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			c := newDoneCounter(3)
			go func() {
				for range 3 {
					time.Sleep(20 * time.Second) // slower than the stall between events, never idle for it
					c.add()
				}
			}()
			lost, _, err := c.wait(context.Background(), 35*time.Second)
			if err != nil || lost != 0 {
				t.Errorf("wait() = %d lost, %v; want 0, nil", lost, err)
			}
		})
	})
	t.Run("some never arrive", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			c := newDoneCounter(5)
			start := time.Now()
			time.Sleep(time.Second)
			c.add()
			time.Sleep(time.Second)
			c.add()
			lost, lastAt, err := c.wait(context.Background(), 35*time.Second)
			if err != nil || lost != 3 {
				t.Fatalf("wait() = %d lost, %v; want 3, nil", lost, err)
			}
			if got := lastAt.Sub(start); got != 2*time.Second {
				t.Errorf("latest event at %s, want 2s", got)
			}
			if waited := time.Since(start); waited < 37*time.Second || waited > 38*time.Second {
				t.Errorf("gave up after %s, want the stall (35 s) after the call at 2 s", waited)
			}
			s := lostSample(5, lost, start, lastAt, time.Second)
			if s.events != 2 || s.lost != 3 || s.seconds != 2 {
				t.Errorf("lostSample = %d events, %d lost, %.1f s; want 2, 3, 2", s.events, s.lost, s.seconds)
			}
		})
	})
	t.Run("context ends", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			c := newDoneCounter(2)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, _, err := c.wait(ctx, 35*time.Second); err == nil {
				t.Error("wait() returned no error when its context ended first")
			}
		})
	})
}
