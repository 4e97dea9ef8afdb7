// Package shard splits the autoscalers between several replicas of
// `tidal autoscaler` (--sharding): each replica keeps a Lease of its own in
// one group, every replica reads the group's Leases, and each object is
// reconciled by the member that rendezvous hashing of its key chooses
// among the live members. A member that joins takes its share only after
// the others have had time to see it (the settle time), and a member that
// stops (its Lease deleted, or expired) leaves its share to the others at
// once; so no object is reconciled by two replicas at the same time, and
// a replica that dies moves its share within the lease duration and a
// read period of its last renewal.
package shard

import (
	"hash/fnv"
	"slices"
	"time"
)

// Owner returns the member that owns key among members by rendezvous
// (highest random weight) hashing: every member computes the same owner
// from the same member list, and when a member leaves only its own keys
// move (to the next-highest member of each), when one joins it takes
// about 1/N of the keys from every other. "" when there are no members.
func Owner(key string, members []string) string {
	var (
		best  string
		bestW uint64
	)
	for _, m := range members {
		w := weight(m, key)
		if best == "" || w > bestW || (w == bestW && m < best) {
			best, bestW = m, w
		}
	}
	return best
}

// weight is the hash of member and key, mixed (splitmix64's finalizer) so
// that members whose names differ in a few bytes still spread evenly.
func weight(member, key string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(member))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(key))
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// Record is what a member's Lease says: who holds it, since when
// (acquired: when it last joined), and when it last renewed it.
type Record struct {
	Holder            string
	Acquired, Renewed time.Time
	Duration          time.Duration
}

// Live reports whether the record's holder is a member at now: it holds
// the Lease and renewed it less than its duration ago.
func (r Record) Live(now time.Time) bool {
	return r.Holder != "" && now.Before(r.Renewed.Add(r.Duration))
}

// Members returns the sorted holders of the live records at now.
func Members(records []Record, now time.Time) []string {
	var out []string
	for _, r := range records {
		if r.Live(now) && !slices.Contains(out, r.Holder) {
			out = append(out, r.Holder)
		}
	}
	slices.Sort(out)
	return out
}

// View is what one member knows at one time: the members, and whether it
// may reconcile its share.
type View struct {
	Members []string
	Self    string
	// Active: this member joined at least the settle time ago (the others
	// have read its Lease since, and left it its share), renewed its own
	// Lease within the renew deadline, and read the group within the
	// settle time (it knows of every member that could have joined).
	Active bool
}

// Owns reports whether the member reconciles key in this view.
func (v View) Owns(key string) bool {
	return v.Active && Owner(key, v.Members) == v.Self
}

// Equal reports whether two views give every key the same owner.
func (v View) Equal(o View) bool {
	return v.Active == o.Active && v.Self == o.Self && slices.Equal(v.Members, o.Members)
}
