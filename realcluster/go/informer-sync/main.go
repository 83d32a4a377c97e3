// informer-sync: client-go's shared informers for Pods, Deployments and Nodes, with
// client-go's default feature gates (WatchListClient on from v0.35: each informer's
// initial list is a streaming watch), against the server a kubeconfig names.
//
// It prints one line once all three caches have synced and exits 0; it exits 1 when
// they have not synced within -timeout, and 2 on a usage or kubeconfig error.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/features"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "path of the kubeconfig naming the server (required)")
	timeout := flag.Duration("timeout", 60*time.Second, "give up when the caches have not synced by then")
	flag.Parse()
	if *kubeconfig == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: informer-sync -kubeconfig PATH [-timeout 60s]")
		os.Exit(2)
	}
	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintf(os.Stderr, "informer-sync: %v\n", err)
		os.Exit(2)
	}
	config.UserAgent = "informer-sync"
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		fmt.Fprintf(os.Stderr, "informer-sync: %v\n", err)
		os.Exit(2)
	}

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	factory := informers.NewSharedInformerFactory(client, 0)
	pods := factory.Core().V1().Pods()
	deployments := factory.Apps().V1().Deployments()
	nodes := factory.Core().V1().Nodes()
	synced := []cache.InformerSynced{
		pods.Informer().HasSynced, deployments.Informer().HasSynced, nodes.Informer().HasSynced,
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		fmt.Fprintf(os.Stderr, "informer-sync: the caches did not sync within %s\n", *timeout)
		cancel()
		os.Exit(1)
	}
	podList, _ := pods.Lister().List(labels.Everything())
	deploymentList, _ := deployments.Lister().List(labels.Everything())
	nodeList, _ := nodes.Lister().List(labels.Everything())
	fmt.Printf("synced pods=%d deployments=%d nodes=%d WatchListClient=%t\n",
		len(podList), len(deploymentList), len(nodeList),
		features.FeatureGates().Enabled(features.WatchListClient))
	cancel()
}
