package store

import (
	"testing"
	"time"
)

// Settle (and so OpenReader, DB.close under sessionEntry.mu) waits for the queue to be
// empty, not for the jobs queued before the call: a session whose writes keep coming
// starves it.
func TestReviewSettleStarvedByLaterJobs(t *testing.T) {
	r := newRoot(t)
	d := mustSession(t, r, "starve")
	release := make(chan struct{})
	d.later(func() { <-release }) // the only job queued before the read
	settled := make(chan struct{})
	go func() {
		rd, err := r.OpenReader("starve")
		if err == nil {
			rd.Close()
		}
		close(settled)
	}()
	time.Sleep(50 * time.Millisecond)
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			d.later(func() { time.Sleep(5 * time.Millisecond) })
		}
	}()
	close(release)
	select {
	case <-settled:
	case <-time.After(2 * time.Second):
		t.Errorf("OpenReader still waiting 2 s after the one job queued before it ran")
	}
	close(stop)
	<-settled
}
