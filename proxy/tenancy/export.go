package tenancy

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
)

// DumpFormat names the format of a Dump, checked when one is read back.
const DumpFormat = "csi-gateway-ledger/1"

// Dump is a ledger's records, for `csi-gateway ledger export` (backups) and migration
// between stores: every object a tenant owns, the backend name it was created under and a
// volume's bytes, with each tenant's counts (which a reader checks against the objects).
//
// It holds no quota holds and no operation locks: they belong to calls in flight (or, for a
// create's hold, to the retry of its name), and would, restored where no such call runs,
// only keep room or objects locked until they expired or were released. The ledger follows the
// backend, so a call in flight at export time is recorded by the orchestrator's retry, as
// after a crash. Encoded (Encode), a Dump is canonical: the same records give the same bytes
// whichever store they came from, so its Checksum compares ledgers.
type Dump struct {
	Format  string          `json:"format"`
	Tenants []TenantSummary `json:"tenants"` // by name
	Objects []DumpObject    `json:"objects"` // by kind, then backend ID
}

// TenantSummary is what one tenant owns.
type TenantSummary struct {
	Tenant string `json:"tenant"`
	// Objects counts the tenant's objects by kind (DumpObject.Kind).
	Objects map[string]int64 `json:"objects"`
	// VolumeBytes is the sum of its volumes' bytes: its recorded usage, with Objects["volume"].
	VolumeBytes int64 `json:"volumeBytes"`
}

// DumpObject is one backend object's record.
type DumpObject struct {
	Kind   string `json:"kind"` // volume, snapshot, groupSnapshot, volumeGroup
	ID     string `json:"id"`   // its backend ID
	Tenant string `json:"tenant"`
	Name   string `json:"name,omitempty"`  // the backend name it was created under
	Asked  string `json:"asked,omitempty"` // the name the tenant gave, when Name does not show it (Record.Asked)
	Bytes  int64  `json:"bytes,omitempty"` // a volume's capacity
}

// dumpKinds are the kinds' names in a Dump, in the order objects are sorted.
var dumpKinds = []struct {
	kind Kind
	name string
}{{Volume, "volume"}, {Snapshot, "snapshot"}, {GroupSnapshot, "groupSnapshot"}, {VolumeGroup, "volumeGroup"}}

func dumpKindName(k Kind) (string, error) {
	for _, dk := range dumpKinds {
		if dk.kind == k {
			return dk.name, nil
		}
	}
	return "", fmt.Errorf("a record of unknown kind %d", k)
}

func dumpKind(name string) (Kind, error) {
	for _, dk := range dumpKinds {
		if dk.name == name {
			return dk.kind, nil
		}
	}
	return 0, fmt.Errorf("kind %q is not one of volume, snapshot, groupSnapshot, volumeGroup", name)
}

// Export reads every record of store, at one point in time, into a Dump.
func Export(ctx context.Context, store Store) (*Dump, error) {
	var objects []DumpObject
	err := store.each(ctx, func(kind Kind, id string, r Record) error {
		name, err := dumpKindName(kind)
		if err != nil {
			return fmt.Errorf("object %q: %w", id, err)
		}
		objects = append(objects, DumpObject{Kind: name, ID: id, Tenant: r.Tenant, Name: r.Name, Asked: r.Asked, Bytes: r.Bytes})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return newDump(objects), nil
}

// newDump sorts objects and counts them per tenant.
func newDump(objects []DumpObject) *Dump {
	order := func(name string) Kind { k, _ := dumpKind(name); return k }
	slices.SortFunc(objects, func(a, b DumpObject) int {
		return cmp.Or(cmp.Compare(order(a.Kind), order(b.Kind)), cmp.Compare(a.ID, b.ID))
	})
	return &Dump{Format: DumpFormat, Tenants: summarize(objects), Objects: objects}
}

// summarize counts objects per tenant, sorted by tenant.
func summarize(objects []DumpObject) []TenantSummary {
	byTenant := map[string]*TenantSummary{}
	for _, o := range objects {
		s := byTenant[o.Tenant]
		if s == nil {
			s = &TenantSummary{Tenant: o.Tenant, Objects: map[string]int64{}}
			byTenant[o.Tenant] = s
		}
		s.Objects[o.Kind]++
		if o.Kind == "volume" {
			s.VolumeBytes += o.Bytes
		}
	}
	out := make([]TenantSummary, 0, len(byTenant))
	for _, s := range byTenant {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b TenantSummary) int { return cmp.Compare(a.Tenant, b.Tenant) })
	return out
}

// Encode writes the Dump's canonical JSON: indented, one object per line.
func (d *Dump) Encode(w io.Writer) error {
	_, err := w.Write(d.canonical())
	return err
}

func (d *Dump) canonical() []byte {
	var b bytes.Buffer
	b.WriteString("{\n  \"format\": ")
	writeJSON(&b, d.Format)
	b.WriteString(",\n  \"tenants\": [")
	for i, t := range d.Tenants {
		b.WriteString(comma(i) + "\n    ")
		writeJSON(&b, t) // encoding/json sorts the map's keys
	}
	b.WriteString("\n  ],\n  \"objects\": [")
	for i, o := range d.Objects {
		b.WriteString(comma(i) + "\n    ")
		writeJSON(&b, o)
	}
	b.WriteString("\n  ]\n}\n")
	return b.Bytes()
}

func comma(i int) string {
	if i == 0 {
		return ""
	}
	return ","
}

func writeJSON(b *bytes.Buffer, v any) {
	out, _ := json.Marshal(v) // strings, ints and maps of them: cannot fail
	b.Write(out)
}

// Checksum is the SHA-256 of the Dump's canonical encoding, in hex.
func (d *Dump) Checksum() string {
	sum := sha256.Sum256(d.canonical())
	return hex.EncodeToString(sum[:])
}

// ReadDump reads a Dump that Encode wrote, and checks it: its format, every object's kind and
// tenant, no object or backend name twice, and the tenants' counts against the objects (a
// truncated or hand-edited file is refused rather than imported in part).
func ReadDump(r io.Reader) (*Dump, error) {
	var d Dump
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return nil, fmt.Errorf("not a ledger export: %w", err)
	}
	if d.Format != DumpFormat {
		return nil, fmt.Errorf("format %q: this gateway reads %q", d.Format, DumpFormat)
	}
	type key struct{ kind, id string }
	ids, names := map[key]bool{}, map[key]bool{}
	for i, o := range d.Objects {
		if _, err := dumpKind(o.Kind); err != nil {
			return nil, fmt.Errorf("objects[%d]: %w", i, err)
		}
		if err := ValidTenantName(o.Tenant); err != nil {
			return nil, fmt.Errorf("objects[%d].tenant: %w", i, err)
		}
		switch {
		case o.ID == "":
			return nil, fmt.Errorf("objects[%d]: no id", i)
		case ids[key{o.Kind, o.ID}]:
			return nil, fmt.Errorf("objects[%d]: %s %q is listed twice", i, o.Kind, o.ID)
		case o.Name != "" && names[key{o.Kind, o.Name}]:
			return nil, fmt.Errorf("objects[%d]: the %s name %q is listed twice", i, o.Kind, o.Name)
		}
		ids[key{o.Kind, o.ID}], names[key{o.Kind, o.Name}] = true, o.Name != ""
	}
	got := newDump(slices.Clone(d.Objects))
	if !slices.EqualFunc(got.Tenants, d.Tenants, equalSummary) {
		return nil, errors.New("the tenants' counts do not match the objects: the file is truncated or was edited")
	}
	return got, nil
}

func equalSummary(a, b TenantSummary) bool {
	if a.Tenant != b.Tenant || a.VolumeBytes != b.VolumeBytes || len(a.Objects) != len(b.Objects) {
		return false
	}
	for k, n := range a.Objects {
		if b.Objects[k] != n {
			return false
		}
	}
	return true
}

// ErrNotEmpty is Import's refusal of a store that holds records, without merge.
var ErrNotEmpty = errors.New("the target ledger is not empty")

// importWorkers bounds the records Import writes at once; each worker writes one tenant's
// records, so that no two contend for a tenant's usage.
const importWorkers = 8

// Import records d's objects in store. A store that holds records is refused
// (ErrNotEmpty) unless merge: then d's objects are added to it, and an object already there
// is updated, or refused if another tenant owns it. Importing the same Dump again (with
// merge) changes nothing: the records and the usage they count are the same.
func Import(ctx context.Context, store Store, d *Dump, merge bool) error {
	if !merge {
		empty := errors.New("not empty")
		if err := store.each(ctx, func(Kind, string, Record) error { return empty }); err != nil {
			if errors.Is(err, empty) {
				return ErrNotEmpty
			}
			return err
		}
	}
	byTenant := map[string][]DumpObject{}
	for _, o := range d.Objects {
		byTenant[o.Tenant] = append(byTenant[o.Tenant], o)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	slots := make(chan struct{}, importWorkers)
	for _, objects := range byTenant {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			for _, o := range objects {
				kind, _ := dumpKind(o.Kind) // ReadDump checked it
				if err := store.record(ctx, kind, o.ID, Record{Tenant: o.Tenant, Name: o.Name, Asked: o.Asked, Bytes: o.Bytes}, nil); err != nil {
					cancel(fmt.Errorf("%s %q of %s: %w", o.Kind, o.ID, o.Tenant, err))
					return
				}
			}
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}
