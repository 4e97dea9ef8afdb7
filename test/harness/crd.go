package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
)

// CRDResource is apiextensions.k8s.io/v1 customresourcedefinitions; the
// harness applies CRDs with the dynamic client so Tidal's module does not
// need the apiextensions-apiserver module.
var CRDResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// ApplyCRDs creates (or replaces) every CustomResourceDefinition in the
// YAML files of dir, such as the repository's manifests/crd, and waits
// until each is Established. It returns the CRDs' names.
func (h *Harness) ApplyCRDs(ctx context.Context, dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no *.yaml files in %s", dir)
	}
	client, err := dynamic.NewForConfig(h.Admin)
	if err != nil {
		return nil, err
	}
	crds := client.Resource(CRDResource)
	var names []string
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		for i, doc := range strings.Split(string(data), "\n---") {
			if strings.TrimSpace(strings.TrimPrefix(doc, "---")) == "" {
				continue
			}
			obj := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
				return nil, fmt.Errorf("%s: document %d: %w", file, i, err)
			}
			if obj.GetKind() != "CustomResourceDefinition" {
				return nil, fmt.Errorf("%s: document %d is a %s, not a CustomResourceDefinition", file, i, obj.GetKind())
			}
			_, err := crds.Create(ctx, obj, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				var cur *unstructured.Unstructured
				if cur, err = crds.Get(ctx, obj.GetName(), metav1.GetOptions{}); err == nil {
					obj.SetResourceVersion(cur.GetResourceVersion())
					_, err = crds.Update(ctx, obj, metav1.UpdateOptions{})
				}
			}
			if err != nil {
				return nil, fmt.Errorf("apply CRD %s from %s: %w", obj.GetName(), file, err)
			}
			names = append(names, obj.GetName())
		}
	}
	for _, name := range names {
		err := waitFor(ctx, nil, "CRD "+name+" Established", 30*time.Second, func(ctx context.Context) error {
			cur, err := crds.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			conds, _, _ := unstructured.NestedSlice(cur.Object, "status", "conditions")
			for _, c := range conds {
				m, _ := c.(map[string]any)
				if m["type"] == "Established" && m["status"] == "True" {
					return nil
				}
			}
			return fmt.Errorf("not Established yet")
		})
		if err != nil {
			return nil, err
		}
	}
	return names, nil
}

// GetHorizontalAutoscaler reads namespace/name through client, typed.
func GetHorizontalAutoscaler(ctx context.Context, client dynamic.Interface, namespace, name string) (*v1alpha1.HorizontalAutoscaler, error) {
	u, err := client.Resource(v1alpha1.GroupVersionResource).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	ha := &v1alpha1.HorizontalAutoscaler{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, ha); err != nil {
		return nil, fmt.Errorf("HorizontalAutoscaler %s/%s: %w", namespace, name, err)
	}
	return ha, nil
}

// CreateHorizontalAutoscaler creates ha through client without its status,
// which belongs to the controller. Kind and apiVersion are set here.
func CreateHorizontalAutoscaler(ctx context.Context, client dynamic.Interface, ha *v1alpha1.HorizontalAutoscaler) error {
	ha = ha.DeepCopy()
	ha.TypeMeta = metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.Kind}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ha)
	if err != nil {
		return err
	}
	delete(obj, "status")
	if _, err := client.Resource(v1alpha1.GroupVersionResource).Namespace(ha.Namespace).Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create HorizontalAutoscaler %s/%s: %w", ha.Namespace, ha.Name, err)
	}
	return nil
}
