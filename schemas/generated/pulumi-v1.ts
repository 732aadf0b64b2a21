/**
 * Generated from schemas/*.schema.json by `npm run generate`. Do not edit.
 */

import * as pulumi from '@pulumi/pulumi';
import type * as k8s from '@pulumi/kubernetes';
import type { ProgramSpec, ProgramStatus, StackSpec, StackStatus } from './types';

type Primitive = string | number | boolean | bigint | symbol | null;

/**
 * `T` where every field, at every depth, may also be a pulumi Input (an Output or a Promise).
 * `undefined` is taken off first so that an optional `boolean` stays `Input<boolean>` rather than
 * `Input<true> | Input<false>`, which an `Output<boolean>` would not match.
 */
export type DeepInput<T> = undefined extends T ? DeepInputOf<Exclude<T, undefined>> | undefined : DeepInputOf<T>;

type DeepInputOf<T> = [T] extends [Primitive]
  ? pulumi.Input<T>
  : [T] extends [readonly (infer E)[]]
    ? pulumi.Input<DeepInput<E>[]>
    : [T] extends [object]
      ? pulumi.Input<{ [K in keyof T]: DeepInput<T[K]> }>
      : pulumi.Input<T>;

/**
 * The arguments of a {@link Stack}.
 */
export interface StackArgs {
  /**
   * Standard object metadata. `name` defaults to the resource name with a random suffix.
   */
  metadata?: pulumi.Input<k8s.types.input.meta.v1.ObjectMeta>;
  /**
   * Desired state of a Stack: which Pulumi stack, where its program comes from (exactly one of a git repository, `fluxSource` or `programRef`), its configuration and environment, and when and how to run operations.
   */
  spec: DeepInput<StackSpec>;
}

/**
 * A Stack deploys a Pulumi stack from a git repository, a Flux source or a Program, and keeps it up to date. Its status reports the last operation, the stack outputs and kstatus-style conditions.
 *
 * Pulumi type token `kubernetes:pulumi.com/v1:Stack`.
 */
export class Stack extends pulumi.CustomResource {
  static readonly __pulumiType = 'kubernetes:pulumi.com/v1:Stack';

  /**
   * Reads an existing Stack: `id` is `<namespace>/<name>`.
   */
  static get(name: string, id: pulumi.Input<pulumi.ID>, opts?: pulumi.CustomResourceOptions): Stack {
    // With opts.id the engine reads the object; the arguments are not used.
    return new Stack(name, {} as StackArgs, { ...opts, id });
  }

  /**
   * Whether `obj` is a Stack, also when it comes from another copy of this module.
   */
  static override isInstance(obj: unknown): obj is Stack {
    return pulumi.CustomResource.isInstance(obj) && (obj as { __pulumiType?: unknown }).__pulumiType === Stack.__pulumiType;
  }

  declare readonly apiVersion: pulumi.Output<'pulumi.com/v1'>;
  declare readonly kind: pulumi.Output<'Stack'>;
  declare readonly metadata: pulumi.Output<k8s.types.output.meta.v1.ObjectMeta>;
  declare readonly spec: pulumi.Output<StackSpec>;
  /**
   * Observed state, as the operator last wrote it (read when the resource is created, updated or refreshed).
   */
  declare readonly status: pulumi.Output<StackStatus | undefined>;

  constructor(name: string, args: StackArgs, opts?: pulumi.CustomResourceOptions) {
    const inputs: pulumi.Inputs = {
      apiVersion: 'pulumi.com/v1',
      kind: 'Stack',
      metadata: args.metadata,
      spec: args.spec,
      // Listed so that the engine fills the output property.
      status: undefined,
    };
    super(Stack.__pulumiType, name, inputs, opts);
  }
}

/**
 * The arguments of a {@link Program}.
 */
export interface ProgramArgs {
  /**
   * Standard object metadata. `name` defaults to the resource name with a random suffix.
   */
  metadata?: pulumi.Input<k8s.types.input.meta.v1.ObjectMeta>;
  /**
   * The program.
   */
  program?: DeepInput<ProgramSpec>;
}

/**
 * A Program is a Pulumi YAML program kept in the cluster. A Stack deploys it by naming it in `spec.programRef`.
 *
 * Pulumi type token `kubernetes:pulumi.com/v1:Program`.
 */
export class Program extends pulumi.CustomResource {
  static readonly __pulumiType = 'kubernetes:pulumi.com/v1:Program';

  /**
   * Reads an existing Program: `id` is `<namespace>/<name>`.
   */
  static get(name: string, id: pulumi.Input<pulumi.ID>, opts?: pulumi.CustomResourceOptions): Program {
    // With opts.id the engine reads the object; the arguments are not used.
    return new Program(name, {}, { ...opts, id });
  }

  /**
   * Whether `obj` is a Program, also when it comes from another copy of this module.
   */
  static override isInstance(obj: unknown): obj is Program {
    return pulumi.CustomResource.isInstance(obj) && (obj as { __pulumiType?: unknown }).__pulumiType === Program.__pulumiType;
  }

  declare readonly apiVersion: pulumi.Output<'pulumi.com/v1'>;
  declare readonly kind: pulumi.Output<'Program'>;
  declare readonly metadata: pulumi.Output<k8s.types.output.meta.v1.ObjectMeta>;
  declare readonly program: pulumi.Output<ProgramSpec>;
  /**
   * Observed state, as the operator last wrote it (read when the resource is created, updated or refreshed).
   */
  declare readonly status: pulumi.Output<ProgramStatus | undefined>;

  constructor(name: string, args: ProgramArgs, opts?: pulumi.CustomResourceOptions) {
    const inputs: pulumi.Inputs = {
      apiVersion: 'pulumi.com/v1',
      kind: 'Program',
      metadata: args.metadata,
      program: args.program,
      // Listed so that the engine fills the output property.
      status: undefined,
    };
    super(Program.__pulumiType, name, inputs, opts);
  }
}
