package ruleset

import (
	"fmt"
	"time"

	"github.com/tidal-autoscaler/tidal/adapter/prom"
	"github.com/tidal-autoscaler/tidal/rules/config"
	"github.com/tidal-autoscaler/tidal/rules/naming"
	"github.com/tidal-autoscaler/tidal/rules/promql"
)

// ResourceRules are the compiled resourceRules (metrics.k8s.io).
type ResourceRules struct {
	CPU, Memory *ResourceRule
	// Window is the file's resourceRules.window; 0 when unset.
	Window time.Duration
}

// ResourceRule is one compiled resourceRules entry (cpu or memory).
type ResourceRule struct {
	// ID is "resourceRules.cpu" or "resourceRules.memory".
	ID             string
	Resources      *naming.Resources
	Container      *promql.Query
	Node           *promql.Query
	ContainerLabel string
	// Client is the default backend: resourceRules name none.
	Client prom.Client
}

func compileResource(key string, r config.ResourceRule, mapper naming.ResourceMapper, b *prom.Backends) (*ResourceRule, error) {
	id := "resourceRules." + key
	res, err := naming.NewResources(r.Resources, mapper)
	if err != nil {
		return nil, fmt.Errorf("%s.resources: %w", id, err)
	}
	cq, err := promql.NewQuery(r.ContainerQuery, res)
	if err != nil {
		return nil, fmt.Errorf("%s.containerQuery: %w", id, err)
	}
	nq, err := promql.NewQuery(r.NodeQuery, res)
	if err != nil {
		return nil, fmt.Errorf("%s.nodeQuery: %w", id, err)
	}
	client, err := b.Get("")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", id, err)
	}
	label := r.ContainerLabel
	if label == "" {
		label = "container"
	}
	return &ResourceRule{ID: id, Resources: res, Container: cq, Node: nq, ContainerLabel: label, Client: client}, nil
}

func compileResourceRules(rr *config.ResourceRules, mapper naming.ResourceMapper, b *prom.Backends) (*ResourceRules, error) {
	cpu, err := compileResource("cpu", rr.CPU, mapper, b)
	if err != nil {
		return nil, err
	}
	mem, err := compileResource("memory", rr.Memory, mapper, b)
	if err != nil {
		return nil, err
	}
	return &ResourceRules{CPU: cpu, Memory: mem, Window: time.Duration(rr.Window)}, nil
}
