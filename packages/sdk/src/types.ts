import type * as P from "@cm/protocol";
import type { z } from "zod";

/*
 * Every shape here is the protocol's zod schema as the API answers it (z.output)
 * or as a caller may give it: no second copy of any field.
 */
type Out<S extends z.ZodType> = z.output<S>;
type In<S extends z.ZodType> = z.input<S>;

export type User = Out<typeof P.User>;
export type NonceResponse = Out<typeof P.NonceResponse>;
export type VerifyRequest = In<typeof P.VerifyRequest>;
export type VerifyResponse = Out<typeof P.VerifyResponse>;
export type TokenPair = Out<typeof P.TokenPair>;
export type MeResponse = Out<typeof P.MeResponse>;
export type LogoutResponse = Out<typeof P.LogoutResponse>;
export type ApiKeyScope = P.ApiKeyScope;
export type ApiKey = Out<typeof P.ApiKey>;
export type CreateApiKeyRequest = In<typeof P.CreateApiKeyRequest>;
export type CreateApiKeyResponse = Out<typeof P.CreateApiKeyResponse>;
export type ApiKeyListResponse = Out<typeof P.ApiKeyListResponse>;

export type NodeListQuery = Partial<Out<typeof P.NodeListQuery>>;
export type NodeListResponse = Out<typeof P.NodeListResponse>;
export type NodeSummary = Out<typeof P.NodeSummary>;
export type NodeDetail = Out<typeof P.NodeDetail>;
export type NodeResponse = Out<typeof P.NodeResponse>;
export type CreateNodeRequest = In<typeof P.CreateNodeRequest>;
export type CreateNodeResponse = Out<typeof P.CreateNodeResponse>;
export type OperatorNodeListQuery = Partial<Out<typeof P.OperatorNodeListQuery>>;
export type OperatorNodeListResponse = Out<typeof P.OperatorNodeListResponse>;
export type OperatorNode = Out<typeof P.OperatorNode>;
export type UpdateNodeRequest = In<typeof P.UpdateNodeRequest>;
export type MaintenanceRequest = In<typeof P.MaintenanceRequest>;
export type OperatorNodeResponse = Out<typeof P.OperatorNodeResponse>;
export type OperatorNodeDeployment = Out<typeof P.OperatorNodeDeployment>;
export type OperatorNodeDeploymentListQuery = Partial<Out<typeof P.OperatorNodeDeploymentListQuery>>;
export type OperatorNodeDeploymentListResponse = Out<typeof P.OperatorNodeDeploymentListResponse>;
export type Earnings = Out<typeof P.Earnings>;
export type EarningsQuery = Partial<Out<typeof P.EarningsQuery>>;
export type EarningsResponse = Out<typeof P.EarningsResponse>;
export type EarningTransaction = Out<typeof P.EarningTransaction>;
export type EarningTransactionListQuery = Partial<Out<typeof P.EarningTransactionListQuery>>;
export type EarningTransactionListResponse = Out<typeof P.EarningTransactionListResponse>;
export type PayoutStatus = P.PayoutStatus;
export type Payout = Out<typeof P.Payout>;
export type PayoutRequest = In<typeof P.PayoutRequest>;
export type PayoutResponse = Out<typeof P.PayoutResponse>;
export type PayoutListQuery = Partial<Out<typeof P.PayoutListQuery>>;
export type PayoutListResponse = Out<typeof P.PayoutListResponse>;

export type TemplateListQuery = Partial<Out<typeof P.TemplateListQuery>>;
export type TemplateListResponse = Out<typeof P.TemplateListResponse>;
export type TemplateResponse = Out<typeof P.TemplateResponse>;
export type TemplateDetail = Out<typeof P.TemplateDetail>;

export type DeploymentStatus = Out<typeof P.DeploymentStatus>;
export type Deployment = Out<typeof P.Deployment>;
export type CreateDeploymentRequest = In<typeof P.CreateDeploymentRequest>;
export type CreateDeploymentResponse = Out<typeof P.CreateDeploymentResponse>;
export type DeploymentEstimateResponse = Out<typeof P.DeploymentEstimateResponse>;
export type DeploymentListQuery = Partial<Out<typeof P.DeploymentListQuery>>;
export type DeploymentListResponse = Out<typeof P.DeploymentListResponse>;
export type DeploymentResponse = Out<typeof P.DeploymentResponse>;
export type DeleteDeploymentResponse = Out<typeof P.DeleteDeploymentResponse>;
export type RegistryCredential = Out<typeof P.RegistryCredential>;
export type CreateRegistryCredentialRequest = In<typeof P.CreateRegistryCredentialRequest>;
export type RegistryCredentialResponse = Out<typeof P.RegistryCredentialResponse>;
export type RegistryCredentialListResponse = Out<typeof P.RegistryCredentialListResponse>;
export type SuccessResponse = Out<typeof P.SuccessResponse>;
export type LogEntry = Out<typeof P.LogEntry>;
export type LogsQuery = Partial<Out<typeof P.LogsQuery>>;
export type LogsResponse = Out<typeof P.LogsResponse>;

export type Balance = Out<typeof P.Balance>;
export type BalanceResponse = Out<typeof P.BalanceResponse>;
export type PackagesResponse = Out<typeof P.PackagesResponse>;
export type CreditPackage = Out<typeof P.CreditPackage>;
export type Deposit = Out<typeof P.Deposit>;
export type InitiateDepositResponse = Out<typeof P.InitiateDepositResponse>;
export type ConfirmDepositResponse = Out<typeof P.ConfirmDepositResponse>;
export type DepositState = Out<typeof P.DepositState>;
export type DepositStateResponse = Out<typeof P.DepositStateResponse>;
export type TransactionListQuery = Partial<Out<typeof P.TransactionListQuery>>;
export type TransactionListResponse = Out<typeof P.TransactionListResponse>;
