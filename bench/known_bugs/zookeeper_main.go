// A main for pravega/zookeeper-operator v0.2.14 and later, built in the operator's module
// by bench/bench_known_bugs.py (tests/support/go_modules.py, build(main=...)) instead of
// its own.  Its own main reads the in-cluster namespace file
// (/var/run/secrets/kubernetes.io/serviceaccount/namespace) and exits without it, then
// takes a leader lock owned by its own Pod (POD_NAME): neither exists for an operator run
// as a process of the test.  This one starts the same manager with the same reconciler
// (the operator's controllers and pkg/zk, unchanged), without the leader election; the
// flags and WATCH_NAMESPACE read as the operator's own main reads them.
package main

import (
	"flag"
	"os"
	"strings"

	api "github.com/pravega/zookeeper-operator/api/v1beta1"
	"github.com/pravega/zookeeper-operator/controllers"
	zkClient "github.com/pravega/zookeeper-operator/pkg/zk"
	apimachineryruntime "k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

func main() {
	var metricsAddr string
	flag.StringVar(&metricsAddr, "metrics-bind-address", "0", "The address the metric endpoint binds to (0: none).")
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseDevMode(false)))
	log := ctrl.Log.WithName("cmd")

	scheme := apimachineryruntime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(api.AddToScheme(scheme))

	options := ctrl.Options{Scheme: scheme, MetricsBindAddress: metricsAddr}
	if namespaces := os.Getenv("WATCH_NAMESPACE"); namespaces != "" {
		watched := strings.Split(namespaces, ",")
		for i := range watched {
			watched[i] = strings.TrimSpace(watched[i])
		}
		options.NewCache = cache.MultiNamespacedCacheBuilder(watched)
		options.Namespace = namespaces
	}
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), options)
	if err != nil {
		log.Error(err, "unable to start manager")
		os.Exit(1)
	}
	if err = (&controllers.ZookeeperClusterReconciler{
		Client:   mgr.GetClient(),
		Log:      ctrl.Log.WithName("controllers").WithName("ZookeeperCluster"),
		Scheme:   mgr.GetScheme(),
		ZkClient: new(zkClient.DefaultZookeeperClient),
	}).SetupWithManager(mgr); err != nil {
		log.Error(err, "unable to create controller", "controller", "ZookeeperCluster")
		os.Exit(1)
	}
	log.Info("starting manager")
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "problem running manager")
		os.Exit(1)
	}
}
