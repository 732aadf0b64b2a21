/** Names one controller gives an object and another looks up. */

/** The ConfigMap the Program hook attaches to a Program, holding its rendered Pulumi.yaml. */
export function programConfigMapName(program: string): string {
  return `${program}-program`;
}
