package explain

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	cliflag "k8s.io/component-base/cli/flag"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
	"github.com/tidal-autoscaler/tidal/internal/cmdutil"
)

// Object is an autoscaler named on the command line.
type Object struct {
	// Kind is KindHA or KindHPA.
	Kind string
	Name string
}

// haTypes and hpaTypes are the accepted TYPEs: kubectl's resource names
// (singular, plural, the CRD's short name ha and the HPA's hpa), each
// optionally qualified by group or version.group.
var (
	haTypes  = []string{"horizontalautoscaler", "horizontalautoscalers", "ha"}
	hpaTypes = []string{"horizontalpodautoscaler", "horizontalpodautoscalers", "hpa"}
)

const typesHelp = "horizontalautoscaler/NAME (ha/NAME) or horizontalpodautoscaler/NAME (hpa/NAME)"

// ParseObject resolves TYPE/NAME or TYPE NAME (args).
func ParseObject(args []string) (Object, error) {
	var typ, name string
	switch len(args) {
	case 1:
		var ok bool
		if typ, name, ok = strings.Cut(args[0], "/"); !ok {
			return Object{}, fmt.Errorf("%q: expected TYPE/NAME or TYPE NAME, %s", args[0], typesHelp)
		}
	case 2:
		typ, name = args[0], args[1]
	default:
		return Object{}, fmt.Errorf("expected one object: %s", typesHelp)
	}
	base, group, _ := strings.Cut(strings.ToLower(typ), ".")
	var o Object
	switch {
	case slices.Contains(haTypes, base) && (group == "" || group == v1alpha1.GroupName || group == "v1alpha1."+v1alpha1.GroupName):
		o.Kind = KindHA
	case slices.Contains(hpaTypes, base) && (group == "" || group == "autoscaling" || group == "v2.autoscaling"):
		o.Kind = KindHPA
	default:
		return Object{}, fmt.Errorf("type %q: explain takes %s", typ, typesHelp)
	}
	if name == "" || strings.Contains(name, "/") {
		return Object{}, fmt.Errorf("%q: expected TYPE/NAME with a name, e.g. ha/web", strings.Join(args, " "))
	}
	o.Name = name
	return o, nil
}

// Clients are the API clients explain reads with.
type Clients struct {
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
}

// Get reads o from namespace and explains it.
func (c Clients) Get(ctx context.Context, namespace string, o Object) (Report, error) {
	if o.Kind == KindHPA {
		hpa, err := c.Kube.AutoscalingV2().HorizontalPodAutoscalers(namespace).Get(ctx, o.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return Report{}, fmt.Errorf("horizontalpodautoscaler %s not found in namespace %s (kubectl get hpa -n %s lists them)", o.Name, namespace, namespace)
		}
		if err != nil {
			return Report{}, fmt.Errorf("reading horizontalpodautoscaler %s/%s: %w", namespace, o.Name, err)
		}
		return OfHorizontalPodAutoscaler(hpa)
	}
	u, err := c.Dynamic.Resource(v1alpha1.GroupVersionResource).Namespace(namespace).Get(ctx, o.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return Report{}, fmt.Errorf("horizontalautoscaler %s not found in namespace %s (kubectl get ha -n %s lists them; is the HorizontalAutoscaler CRD installed? for an autoscaling/v2 HPA, use hpa/%s)", o.Name, namespace, namespace, o.Name)
	}
	if err != nil {
		return Report{}, fmt.Errorf("reading horizontalautoscaler %s/%s: %w", namespace, o.Name, err)
	}
	ha := &v1alpha1.HorizontalAutoscaler{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, ha); err != nil {
		return Report{}, fmt.Errorf("decoding horizontalautoscaler %s/%s: %w", namespace, o.Name, err)
	}
	return OfHorizontalAutoscaler(ha)
}

type options struct {
	Namespace  string
	Kubeconfig string
	Output     string
}

// NewCommand returns `tidal explain`.
func NewCommand() *cobra.Command {
	return newCommand(func(cfg *rest.Config) (Clients, error) {
		kube, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return Clients{}, err
		}
		dyn, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return Clients{}, err
		}
		return Clients{Kube: kube, Dynamic: dyn}, nil
	})
}

// newCommand takes how to build the clients, so that tests can use fakes.
func newCommand(clients func(*rest.Config) (Clients, error)) *cobra.Command {
	o := &options{Output: "text"}
	cmd := &cobra.Command{
		Use:   "explain (TYPE/NAME | TYPE NAME) [-n NAMESPACE] [-o text|yaml|json]",
		Short: "Explain an autoscaler's last decision from its status",
		Long: `Explain an autoscaler's last decision: each metric's current value, target
and the replica count it proposed, then what limited the result (stabilization,
behavior policies, min/max, the tolerance, fallback, a rollout hold, a dry run),
and the conditions. Everything comes from what the controller wrote to the
status (status.tidal.decision and status.conditions); nothing is recomputed.

TYPE is horizontalautoscaler (ha) for a tidal HorizontalAutoscaler, or
horizontalpodautoscaler (hpa) for an autoscaling/v2 HPA: native mode writes the
decision to its autoscaling.tidal.dev/decision annotation; without it (an HPA
of kube-controller-manager's) the values, targets and conditions of its status
are shown, without proposals.

Examples:

  tidal explain ha/web -n shop
  tidal explain hpa web -o yaml
  kubectl tidal explain ha/web   # installed as kubectl-tidal`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), cmd.OutOrStdout(), args, clients)
		},
	}
	var nfs cliflag.NamedFlagSets
	fs := nfs.FlagSet("output")
	fs.StringVarP(&o.Output, "output", "o", o.Output, "Output format: "+strings.Join(Formats, ", ")+".")
	fs = nfs.FlagSet("cluster")
	fs.StringVarP(&o.Namespace, "namespace", "n", "", "The namespace of the autoscaler. If not specified, the kubeconfig context's namespace.")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "Path to the kubeconfig file; without it, $KUBECONFIG or ~/.kube/config.")
	cmdutil.AddFlagSections(cmd, &nfs)
	return cmd
}

func (o *options) run(ctx context.Context, out io.Writer, args []string, clients func(*rest.Config) (Clients, error)) error {
	if !slices.Contains(Formats, o.Output) {
		return fmt.Errorf("-o/--output=%s: expected one of %s", o.Output, strings.Join(Formats, ", "))
	}
	obj, err := ParseObject(args)
	if err != nil {
		return err
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: o.Kubeconfig, Precedence: clientcmd.NewDefaultClientConfigLoadingRules().Precedence},
		&clientcmd.ConfigOverrides{})
	ns := o.Namespace
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil {
			return fmt.Errorf("kubeconfig: %w", err)
		}
		if ns == "" {
			ns = metav1.NamespaceDefault
		}
	}
	cfg, err := cc.ClientConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig (pass --kubeconfig): %w", err)
	}
	cfg.UserAgent = "tidal-explain"
	c, err := clients(cfg)
	if err != nil {
		return err
	}
	r, err := c.Get(ctx, ns, obj)
	if err != nil {
		return err
	}
	return Encode(out, r, o.Output)
}
