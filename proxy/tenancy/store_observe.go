package tenancy

import (
	"context"
	"path"
	"time"

	"google.golang.org/grpc"
)

// StoreObserver is told how the ledger's store fares, for metrics: every request to etcd
// (its gRPC method's short name, such as Txn or Range, how long it took and its error) and
// every lease of the replica's that etcd let expire or revoked while the replica was using
// it (its quota holds and operation locks went with it). A bbolt store tells nothing.
// The calls must not block.
type StoreObserver interface {
	StoreRequest(method string, took time.Duration, err error)
	LeaseLost()
}

// Observe makes the ledger's store report to o from now on.
func (l *Ledger) Observe(o StoreObserver) {
	if s, ok := l.store.(*etcdStore); ok {
		s.observer.Store(&o)
	}
}

// observeRequests is the etcd client's interceptor that times each unary request (each
// attempt, when the client retries) for the observer.
func (s *etcdStore) observeRequests(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	start := time.Now()
	err := invoke(ctx, method, req, reply, cc, opts...)
	if o := s.observer.Load(); o != nil {
		(*o).StoreRequest(path.Base(method), time.Since(start), err)
	}
	return err
}

// leaseLost tells the observer of a lease lost while the store was open.
func (s *etcdStore) leaseLost() {
	if o := s.observer.Load(); o != nil && s.life.Err() == nil {
		(*o).LeaseLost()
	}
}
