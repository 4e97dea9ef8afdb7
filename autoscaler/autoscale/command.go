package autoscale

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	cliflag "k8s.io/component-base/cli/flag"
	"sigs.k8s.io/yaml"

	"github.com/tidal-autoscaler/tidal/autoscaler/apis/autoscaling/v1alpha1"
	"github.com/tidal-autoscaler/tidal/internal/cmdutil"
)

// fieldManager names tidal autoscale in the objects' managedFields.
const fieldManager = "tidal-autoscale"

type cmdOptions struct {
	Options
	Native     bool
	DryRun     string
	Output     string
	Kubeconfig string
}

// NewCommand returns `tidal autoscale`.
func NewCommand() *cobra.Command {
	o := &cmdOptions{Options: Options{Min: -1, Max: -1, CPUPercent: -1}, DryRun: "none"}
	cmd := &cobra.Command{
		Use:   "autoscale (TYPE NAME | TYPE/NAME) [--min=MINPODS] --max=MAXPODS [--cpu-percent=CPU] [--metric=METRIC]...",
		Short: "Create an autoscaler for a deployment, stateful set or replica set",
		Long: `Create an autoscaler for a Deployment, StatefulSet or ReplicaSet, as kubectl
autoscale does: a tidal HorizontalAutoscaler (autoscaling.tidal.dev/v1alpha1),
or with --native an autoscaling/v2 HorizontalPodAutoscaler.

--metric adds a Pods, External or Resource metric; repeat it for more:

  TYPE:NAME:TARGET[,selector=SELECTOR]

  TYPE      pods, external or resource
  NAME      the metric's name (a resource name such as memory for resource)
  TARGET    avg=QUANTITY    average value per pod (pods, external, resource)
            value=QUANTITY  total value (external)
            util=PERCENT    average utilization of the request (resource)
  SELECTOR  a label selector (pods, external); it runs to the end of the
            value, so it may hold commas

Without --cpu-percent or --metric the autoscaler targets 80% average CPU
utilization, as an HPA with no metrics does.

Examples:

  tidal autoscale deployment/web --min=2 --max=10 --cpu-percent=60
  tidal autoscale deploy web --max=10 --metric pods:http_requests_per_second:avg=100
  tidal autoscale sts/worker --max=20 --metric external:queue_depth:avg=30,selector=queue=orders
  tidal autoscale deployment/web --max=10 --native --dry-run=client -o yaml
  kubectl tidal autoscale deployment/web --max=10   # installed as kubectl-tidal`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), cmd.OutOrStdout(), args)
		},
	}
	var nfs cliflag.NamedFlagSets
	fs := nfs.FlagSet("autoscaler")
	fs.Int32Var(&o.Min, "min", o.Min, "The lower limit for the number of pods that can be set by the autoscaler. If it's not specified or negative, the server will apply a default value.")
	fs.Int32Var(&o.Max, "max", o.Max, "The upper limit for the number of pods that can be set by the autoscaler. Required.")
	fs.Int32Var(&o.CPUPercent, "cpu-percent", o.CPUPercent, "The target average CPU utilization (represented as a percent of requested CPU) over all the pods. If it's not specified or negative, a default autoscaling policy will be used.")
	fs.StringArrayVar(&o.Metrics, "metric", nil, "A Pods, External or Resource metric, as "+MetricSyntax+". Repeatable.")
	fs.StringVar(&o.Name, "name", "", "The name for the newly created object. If not specified, the name of the input resource will be used.")
	fs.BoolVar(&o.Native, "native", false, "Create an autoscaling/v2 HorizontalPodAutoscaler instead of a tidal HorizontalAutoscaler.")
	fs = nfs.FlagSet("output")
	fs.StringVar(&o.DryRun, "dry-run", o.DryRun, `Must be "none", "server", or "client". If client strategy, only print the object that would be sent, without contacting the cluster. If server strategy, submit server-side request without persisting the resource.`)
	fs.Lookup("dry-run").NoOptDefVal = "unchanged"
	fs.StringVarP(&o.Output, "output", "o", "", "Output format: yaml, json or name. Without it, a line naming the object.")
	fs = nfs.FlagSet("cluster")
	fs.StringVarP(&o.Namespace, "namespace", "n", "", "The namespace of the target and the autoscaler. If not specified, the kubeconfig context's namespace.")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "Path to the kubeconfig file; without it, $KUBECONFIG or ~/.kube/config.")
	cmdutil.AddFlagSections(cmd, &nfs)
	return cmd
}

func (o *cmdOptions) run(ctx context.Context, out io.Writer, args []string) error {
	switch o.DryRun {
	case "none", "client", "server":
	case "unchanged":
		return fmt.Errorf(`--dry-run needs a value: "none", "server", or "client"`)
	default:
		return fmt.Errorf(`--dry-run=%s: must be "none", "server", or "client"`, o.DryRun)
	}
	switch o.Output {
	case "", "yaml", "json", "name":
	default:
		return fmt.Errorf("-o/--output=%s: expected yaml, json or name", o.Output)
	}
	target, err := ParseTarget(args)
	if err != nil {
		return err
	}
	// Validate the flags before reading the kubeconfig.
	if _, err := Spec(target, o.Options); err != nil {
		return err
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: o.Kubeconfig, Precedence: clientcmd.NewDefaultClientConfigLoadingRules().Precedence},
		&clientcmd.ConfigOverrides{})
	if o.Namespace == "" {
		ns, _, err := cc.Namespace()
		if err != nil && o.DryRun != "client" {
			return fmt.Errorf("kubeconfig: %w", err)
		}
		if ns == "" {
			ns = metav1.NamespaceDefault
		}
		o.Namespace = ns
	}
	var obj runtime.Object
	if o.Native {
		obj, err = HorizontalPodAutoscaler(target, o.Options)
	} else {
		obj, err = HorizontalAutoscaler(target, o.Options)
	}
	if err != nil {
		return err
	}
	if o.DryRun != "client" {
		cfg, err := cc.ClientConfig()
		if err != nil {
			return fmt.Errorf("kubeconfig (pass --kubeconfig, or --dry-run=client to print the object only): %w", err)
		}
		cfg.UserAgent = "tidal-autoscale"
		opts := metav1.CreateOptions{FieldManager: fieldManager}
		if o.DryRun == "server" {
			opts.DryRun = []string{metav1.DryRunAll}
		}
		if obj, err = create(ctx, cfg, obj, opts); err != nil {
			return err
		}
	}
	return printObject(out, obj, o.Output, o.DryRun)
}

func printObject(out io.Writer, obj runtime.Object, format, dryRun string) error {
	switch format {
	case "yaml", "json":
		b, err := json.Marshal(obj)
		if err != nil {
			return err
		}
		if format == "yaml" {
			if b, err = yaml.JSONToYAML(b); err != nil {
				return err
			}
		} else {
			var v any
			if err := json.Unmarshal(b, &v); err != nil {
				return err
			}
			if b, err = json.MarshalIndent(v, "", "    "); err != nil {
				return err
			}
			b = append(b, '\n')
		}
		_, err = out.Write(b)
		return err
	}
	name := resourceName(obj)
	if format == "name" {
		_, err := fmt.Fprintln(out, name)
		return err
	}
	suffix := ""
	if dryRun != "none" {
		suffix = fmt.Sprintf(" (%s dry run)", dryRun)
	}
	_, err := fmt.Fprintf(out, "%s autoscaled%s\n", name, suffix)
	return err
}

// resourceName is kubectl's -o name form: resource.group/name.
func resourceName(obj runtime.Object) string {
	switch o := obj.(type) {
	case *autoscalingv2.HorizontalPodAutoscaler:
		return "horizontalpodautoscaler.autoscaling/" + o.Name
	case *v1alpha1.HorizontalAutoscaler:
		return "horizontalautoscaler." + v1alpha1.GroupName + "/" + o.Name
	}
	return ""
}

func create(ctx context.Context, cfg *rest.Config, obj runtime.Object, opts metav1.CreateOptions) (runtime.Object, error) {
	switch o := obj.(type) {
	case *autoscalingv2.HorizontalPodAutoscaler:
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		created, err := cs.AutoscalingV2().HorizontalPodAutoscalers(o.Namespace).Create(ctx, o, opts)
		if err != nil {
			return nil, fmt.Errorf("creating %s/%s: %w", o.Namespace, o.Name, err)
		}
		created.APIVersion, created.Kind = o.APIVersion, o.Kind
		return created, nil
	case *v1alpha1.HorizontalAutoscaler:
		dc, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			return nil, err
		}
		res, err := dc.Resource(v1alpha1.GroupVersionResource).Namespace(o.Namespace).Create(ctx, &unstructured.Unstructured{Object: u}, opts)
		if err != nil {
			return nil, fmt.Errorf("creating %s/%s (is the HorizontalAutoscaler CRD installed? --native creates an HPA): %w", o.Namespace, o.Name, err)
		}
		created := &v1alpha1.HorizontalAutoscaler{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(res.Object, created); err != nil {
			return nil, err
		}
		return created, nil
	}
	return nil, fmt.Errorf("unexpected object %T", obj)
}
