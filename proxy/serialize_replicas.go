package proxy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/csi-gateway/csi-gateway/auth"
	"github.com/csi-gateway/csi-gateway/proxy/tenancy"
	"github.com/csi-gateway/csi-gateway/redact"
)

// lockAcrossReplicas takes the tenancy store's lock of a tenant's serialized operation's object for
// as long as its backend call runs (tenancy.Ledger.LockOperation), so that replicas of a
// central gateway on one etcd — or one gateway and the process it replaced, on one bbolt
// file — never run two operations on one object at once. It sits inside the Serializer (the
// flight's handler): the in-process table joins a replica's identical calls first, and the
// store's lock is taken once per flight, with the flight's deadline.
//
// What another replica's operation in flight means for a call:
//
//   - an identical one (the same request, secrets aside): the call waits for it to end, then
//     makes its own backend call, which the ended one has made a no-op (a create of the same
//     name finds the volume), so both callers get the same answer and the backend never has
//     two at once. Waiting gives the answer soonest: csi-provisioner retries an ABORTED call
//     only after its exponential backoff (1 s, 2 s, 4 s, … up to 5 min per PVC), while a
//     waiter proceeds the moment the first call ends. It waits for half of the time it has
//     left at most, and is then ABORTED, naming the operation in progress: the other half is
//     kept for its own backend call, so that waiting never makes it DEADLINE_EXCEEDED;
//   - an identical one of a replica that stopped, whose lock (its call's deadline and the
//     slack by which the lock outlives it) does not end within that half: ABORTED at once,
//     naming it;
//   - a different one: ABORTED, as in one replica.
//
// Errors are final statuses (it sits outside canonicalize): ABORTED as above, UNAVAILABLE
// naming the store when it cannot be reached, and the caller's DEADLINE_EXCEEDED or CANCELED
// when it ends while waiting.
func lockAcrossReplicas(ledger *tenancy.Ledger, m *Metrics, r *redact.Redactor) Middleware {
	return func(next Handler) Handler {
		return func(ctx context.Context, call *Call) error {
			tenant := auth.TenantFromContext(ctx)
			op, ok := operationOf(call, tenant)
			if !ok || tenant == "" {
				// A caller of no tenant (an operator's listener) does not use the ledger, so
				// that it keeps working while the store does not; its calls are serialized
				// within the replica only.
				return next(ctx, call)
			}
			identity, err := requestIdentity(call, r)
			if err != nil {
				return status.Errorf(codes.InvalidArgument, "csi-gateway: %v", err)
			}
			lock := tenancy.Operation{Object: op.key, Scope: op.scope, Method: op.describe(), Identity: identity}
			lock.Deadline, _ = ctx.Deadline()
			unlock, err := lockIn(ctx, ledger, lock, call, &op, m, r)
			if err != nil {
				return err
			}
			defer unlock()
			if byName, ok, err := nameLock(ctx, ledger, tenant, &op, lock); err != nil {
				return err
			} else if ok {
				unlockName, err := lockIn(ctx, ledger, byName, call, &op, m, r)
				if err != nil {
					return err
				}
				defer unlockName()
			}
			return next(ctx, call)
		}
	}
}

// lockIn takes the store's lock of one object for call's operation op, timing a wait for
// another replica's identical operation; a refusal is lockRefused's final status.
func lockIn(ctx context.Context, ledger *tenancy.Ledger, lock tenancy.Operation, call *Call, op *operation, m *Metrics, r *redact.Redactor) (func(), error) {
	start := time.Now()
	unlock, waited, err := ledger.LockOperation(ctx, lock)
	if waited {
		m.observeLockWait(call.Method, time.Since(start))
	}
	if err != nil {
		return nil, lockRefused(ctx, call, op, err, m, r)
	}
	return unlock, nil
}

// requestIdentity is a digest of the method and the request, secret values redacted and the
// encoding made deterministic (map entries sorted): the same request has the same identity
// on every replica. Secrets are left out so that no digest of a secret reaches the store;
// two requests differing only in their secrets are then taken as identical, which only makes
// the second wait for the first instead of being refused.
func requestIdentity(call *Call, r *redact.Redactor) (string, error) {
	req, err := call.DecodedRequest()
	if err != nil {
		return "", err
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(r.Redact(req))
	if err != nil {
		return "", err
	}
	h := sha256.New()
	h.Write([]byte(call.Method))
	h.Write([]byte{0})
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// lockRefused is the final status of an operation the store's lock refused.
func lockRefused(ctx context.Context, call *Call, op *operation, err error, m *Metrics, r *redact.Redactor) error {
	var held *tenancy.Held
	switch {
	case errors.As(err, &held):
		m.countAbortedElsewhere(call.Method)
		inFlight := held.Method
		if inFlight == op.describe() {
			inFlight = "another " + inFlight
		}
		var msg string
		if held.HolderGone {
			msg = fmt.Sprintf("csi-gateway: %s: %s was in progress on a gateway replica that stopped, and its backend call may run until %s; retry %s after that",
				op.object(), inFlight, held.Deadline.UTC().Format(time.RFC3339), op.name)
		} else {
			msg = fmt.Sprintf("csi-gateway: %s: %s is already in progress on another replica; retry %s when it has finished",
				op.object(), inFlight, op.name)
		}
		return status.Error(codes.Aborted, boundMessage(call.secrets(r).Scrub(msg)))
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return stoppedWaiting(ctx, op)
	default:
		return err // the ledger's UNAVAILABLE
	}
}
