package tenancy

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// operationsBucket holds the operations in flight, so that a process that restarts does not
// start an operation on an object while the one it had in flight before it stopped may still
// be running on the backend: OBJECT-KEY SLOT → lockValue (JSON), where OBJECT-KEY is the
// object's length (uvarint) and the object, and SLOT is 0 for the whole object or 1 and the
// scope for one attachment.
//
// Within one process the gateway's Serializer already keeps operations on one object apart;
// what the file adds is the operations of the process before: each blocks its object until
// its deadline. Those without a deadline are dropped when the file is opened (the process
// that ran them is gone; there is no lease to wait for).
var operationsBucket = []byte("operations")

// boltLocks is what a boltStore keeps in memory of the operations it has in flight.
type boltLocks struct {
	mu    sync.Mutex
	live  map[string]chan struct{} // this process's operations → closed when they end
	stale [][]byte                 // keys whose delete failed, deleted at the next lock
}

// openOperations creates the bucket, or drops the operations of the process before that can
// no longer be running: those past their deadline, and those without one.
func openOperations(tx *bolt.Tx) error {
	b, err := tx.CreateBucketIfNotExists(operationsBucket)
	if err != nil {
		return err
	}
	var ended [][]byte
	now := time.Now()
	err = b.ForEach(func(k, v []byte) error {
		var lv lockValue
		if json.Unmarshal(v, &lv) != nil || !lv.Deadline.After(now) {
			ended = append(ended, k)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, k := range ended {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

func boltObjectKey(object string) []byte {
	return append(binary.AppendUvarint(nil, uint64(len(object))), object...)
}

func boltOperationKey(op Operation) []byte {
	k := boltObjectKey(op.Object)
	if op.Scope == "" {
		return append(k, 0)
	}
	return append(append(k, 1), op.Scope...)
}

func (s *boltStore) tryLock(_ context.Context, op Operation) (func(), *Held, error) {
	value, err := json.Marshal(valueOf(op))
	if err != nil {
		return nil, nil, err
	}
	key, prefix := boltOperationKey(op), boltObjectKey(op.Object)
	s.locks.mu.Lock()
	defer s.locks.mu.Unlock()
	var held *Held
	err = s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(operationsBucket)
		for _, k := range s.locks.stale {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		s.locks.stale = nil
		var flights []inFlight
		var ended [][]byte
		var waits []<-chan struct{}
		c := b.Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			if !(op.Scope == "" || k[len(prefix)] == 0 || bytes.Equal(k, key)) {
				continue // another attachment's operation
			}
			var lv lockValue
			if err := json.Unmarshal(v, &lv); err != nil {
				return err
			}
			done, alive := s.locks.live[string(k)]
			if !alive && !lv.Deadline.After(time.Now()) {
				ended = append(ended, bytes.Clone(k))
				continue
			}
			flights = append(flights, inFlight{lockValue: lv, alive: alive})
			if alive {
				waits = append(waits, done)
			}
		}
		for _, k := range ended {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		if held = heldBy(op, flights, 0, nil); held != nil {
			held.wait = func(ctx context.Context) error { return waitBolt(ctx, waits, held.Deadline) }
			return nil
		}
		return b.Put(key, value)
	})
	if err != nil || held != nil {
		return nil, held, err
	}
	done := make(chan struct{})
	s.locks.live[string(key)] = done
	return func() { s.unlock(key, done) }, nil, nil
}

// waitBolt returns when one of this process's operations ends, when the deadline of the
// operations of the process before comes (zero: none), or when ctx ends.
func waitBolt(ctx context.Context, live []<-chan struct{}, deadline time.Time) error {
	var timer <-chan time.Time
	if len(live) == 0 {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		timer = t.C
	}
	anyDone := make(chan struct{})
	stop := make(chan struct{})
	defer close(stop)
	for _, d := range live {
		go func() {
			select {
			case <-d:
				select {
				case anyDone <- struct{}{}:
				case <-stop:
				}
			case <-stop:
			}
		}()
	}
	select {
	case <-anyDone:
	case <-timer:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// unlock deletes an operation's entry; one it cannot delete is deleted at the next lock.
func (s *boltStore) unlock(key []byte, done chan struct{}) {
	s.locks.mu.Lock()
	defer s.locks.mu.Unlock()
	err := s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(operationsBucket).Delete(key) })
	if err != nil {
		s.locks.stale = append(s.locks.stale, key)
	}
	delete(s.locks.live, string(key))
	close(done)
}
