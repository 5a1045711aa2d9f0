"""The RayCluster, RayService and RayJob controllers (ports of KubeRay's)."""
