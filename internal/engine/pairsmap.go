package engine

import (
	"reflect"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
)

// pairsMap is `request.headers` or `request.query` in CEL: a
// map(string, string) over Pairs. What a rule does per entry it names, a
// lookup by key (request.headers['k'], has(), `in`) and size(), reads the
// pairs, answering as cel-go's map over a Go map[string]string would; the
// rest (iteration, equality, conversion), which visits every entry anyway,
// is that map, built from the pairs the first time it is needed. So a
// match that reads `dyn(request).headers['k']` in a loop, a new pairsMap
// per access, costs a lookup per access and not a map of every header.
type pairsMap struct {
	a    types.Adapter
	p    Pairs
	full traits.Mapper // built by whole, nil until then
}

var _ traits.Mapper = (*pairsMap)(nil)

func newPairsMap(a types.Adapter, p Pairs) *pairsMap { return &pairsMap{a: a, p: p} }

// whole is cel-go's own map over the entries.
func (m *pairsMap) whole() traits.Mapper {
	if m.full == nil {
		m.full = types.NewStringStringMap(m.a, m.p.Map())
	}
	return m.full
}

// Find implements traits.Mapper: a key that is not a string is in no
// map(string, string), as in cel-go's.
func (m *pairsMap) Find(key ref.Val) (ref.Val, bool) {
	k, ok := key.(types.String)
	if !ok {
		return nil, false
	}
	v, found := m.p.Get(string(k))
	if !found {
		return nil, false
	}
	return types.String(v), true
}

// FindStringKey is the interpreter's lookup by a constant key (order.go).
func (m *pairsMap) FindStringKey(key string) (any, bool) {
	v, found := m.p.Get(key)
	if !found {
		return nil, false
	}
	return types.String(v), true
}

// Contains implements traits.Container (`in`).
func (m *pairsMap) Contains(key ref.Val) ref.Val {
	_, found := m.Find(key)
	return types.Bool(found)
}

// Get implements traits.Indexer, with cel-go's error for a missing key.
func (m *pairsMap) Get(key ref.Val) ref.Val {
	v, found := m.Find(key)
	if !found {
		return types.ValOrErr(v, "no such key: %v", key)
	}
	return v
}

// Size implements traits.Sizer.
func (m *pairsMap) Size() ref.Val { return types.Int(m.p.Len()) }

// IsZeroValue implements traits.Zeroer.
func (m *pairsMap) IsZeroValue() bool { return m.p.Len() == 0 }

// Type implements ref.Val.
func (m *pairsMap) Type() ref.Type { return types.MapType }

// ConvertToType implements ref.Val as cel-go's map does.
func (m *pairsMap) ConvertToType(t ref.Type) ref.Val {
	switch t {
	case types.MapType:
		return m
	case types.TypeType:
		return types.MapType
	}
	return types.NewErr("type conversion error from '%s' to '%s'", types.MapType, t)
}

// Iterator implements traits.Iterable.
func (m *pairsMap) Iterator() traits.Iterator { return m.whole().Iterator() }

// Equal implements ref.Val.
func (m *pairsMap) Equal(other ref.Val) ref.Val { return m.whole().Equal(other) }

// ConvertToNative implements ref.Val.
func (m *pairsMap) ConvertToNative(t reflect.Type) (any, error) { return m.whole().ConvertToNative(t) }

// Value implements ref.Val: the entries as a map[string]string.
func (m *pairsMap) Value() any { return m.whole().Value() }
