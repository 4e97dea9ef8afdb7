package controller

import (
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/meta"
)

// ResettableMapper is a RESTMapper whose cached discovery can be
// refreshed, such as client-go's DeferredDiscoveryRESTMapper.
type ResettableMapper interface {
	meta.RESTMapper
	Reset()
}

// CountedMapper counts the resets of its mapper. The scaler keeps each
// kind's mappings until the next reset, so the mapper's refresh (every
// 30 s, and for a kind it does not know) is the only clock on how stale
// a mapping can be.
type CountedMapper struct {
	ResettableMapper
	resets atomic.Uint64
}

// NewCountedMapper wraps m; give the wrapper, not m, to whatever resets it.
func NewCountedMapper(m ResettableMapper) *CountedMapper {
	return &CountedMapper{ResettableMapper: m}
}

// Reset refreshes the mapper's discovery, then counts: a caller that
// reads the new count asks the refreshed mapper.
func (m *CountedMapper) Reset() {
	m.ResettableMapper.Reset()
	m.resets.Add(1)
}

// Generation is the number of resets so far.
func (m *CountedMapper) Generation() uint64 { return m.resets.Load() }
