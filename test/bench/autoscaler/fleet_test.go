package autoscaler

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
	"github.com/tidal-autoscaler/tidal/test/harness"
)

// tidalPhase is how a tidal phase runs: on which objects, as how many
// replicas, in which mode, with which extra flags.
type tidalPhase struct {
	objects fleet
	// shards > 0 runs that many replicas with --sharding.
	shards int
	// native runs `tidal autoscaler --mode=native` on autoscaling/v2
	// HPAs, with kube-controller-manager's HPA controller stopped.
	native bool
	args   []string
}

// fleet is the objects of a phase: HorizontalAutoscalers (tidal in crd
// mode) or autoscaling/v2 HPAs (kcm, and tidal in native mode), one per
// target, with the same spec.
type fleet struct {
	kind   string
	create func(ctx context.Context, targets []target) error
	// statuses counts the objects by status.desiredReplicas, and those
	// whose status has metrics.
	statuses func(ctx context.Context) (map[int32]int, int, error)
	delete   func(ctx context.Context, namespace string) error
	// any names an object left, or is "" when none is.
	any func(ctx context.Context) (string, error)
}

// deleteAll deletes every object of the fleet in the benchmark's
// namespaces and waits until none is left: the next phase starts from
// none.
func (f fleet) deleteAll(ctx context.Context, cfg config) error {
	for ns := range cfg.namespaces {
		if err := f.delete(ctx, fmt.Sprintf("bench-%d", ns)); err != nil {
			return err
		}
	}
	return harness.WaitReady(ctx, nil, f.kind+" deleted", 2*time.Minute, func(ctx context.Context) error {
		left, err := f.any(ctx)
		if err == nil && left != "" {
			err = fmt.Errorf("%s and more left", left)
		}
		return err
	})
}

// createAll runs create for every target, 16 at a time.
func createAll(ctx context.Context, targets []target, create func(context.Context, target) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for _, t := range targets {
		g.Go(func() error { return create(gctx, t) })
	}
	return g.Wait()
}

// hpaFleet is autoscaling/v2 HPAs, written with admin.
func hpaFleet(admin kubernetes.Interface) fleet {
	hpas := admin.AutoscalingV2()
	return fleet{
		kind: "HPAs",
		create: func(ctx context.Context, targets []target) error {
			err := createAll(ctx, targets, func(ctx context.Context, t target) error {
				hpa := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: t.name, Namespace: t.namespace}, Spec: spec(t)}
				_, err := hpas.HorizontalPodAutoscalers(t.namespace).Create(ctx, hpa, metav1.CreateOptions{})
				return err
			})
			if err != nil {
				return fmt.Errorf("create HPAs: %w", err)
			}
			return nil
		},
		statuses: func(ctx context.Context) (map[int32]int, int, error) {
			list, err := hpas.HorizontalPodAutoscalers("").List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, 0, err
			}
			desired, with := map[int32]int{}, 0
			for _, hpa := range list.Items {
				if len(hpa.Status.CurrentMetrics) > 0 {
					with++
				}
				desired[hpa.Status.DesiredReplicas]++
			}
			return desired, with, nil
		},
		delete: func(ctx context.Context, namespace string) error {
			return hpas.HorizontalPodAutoscalers(namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		},
		any: func(ctx context.Context) (string, error) {
			l, err := hpas.HorizontalPodAutoscalers("").List(ctx, metav1.ListOptions{Limit: 1})
			if err != nil || len(l.Items) == 0 {
				return "", err
			}
			return l.Items[0].Namespace + "/" + l.Items[0].Name, nil
		},
	}
}

// haFleet is HorizontalAutoscalers, written with dyn.
func haFleet(dyn dynamic.Interface) fleet {
	res := dyn.Resource(v1alpha1.GroupVersionResource)
	return fleet{
		kind: "HorizontalAutoscalers",
		create: func(ctx context.Context, targets []target) error {
			if err := createAutoscalers(ctx, dyn, targets); err != nil {
				return fmt.Errorf("create HorizontalAutoscalers: %w", err)
			}
			return nil
		},
		statuses: func(ctx context.Context) (map[int32]int, int, error) {
			list, err := res.List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, 0, err
			}
			desired, with := map[int32]int{}, 0
			for _, u := range list.Items {
				var ha v1alpha1.HorizontalAutoscaler
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ha); err != nil {
					return nil, 0, err
				}
				if len(ha.Status.CurrentMetrics) > 0 {
					with++
				}
				desired[ha.Status.DesiredReplicas]++
			}
			return desired, with, nil
		},
		delete: func(ctx context.Context, namespace string) error {
			return res.Namespace(namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		},
		any: func(ctx context.Context) (string, error) {
			l, err := res.List(ctx, metav1.ListOptions{Limit: 1})
			if err != nil || len(l.Items) == 0 {
				return "", err
			}
			return l.Items[0].GetNamespace() + "/" + l.Items[0].GetName(), nil
		},
	}
}
