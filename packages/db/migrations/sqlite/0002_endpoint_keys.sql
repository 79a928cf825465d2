ALTER TABLE `deployments` ADD `endpoint_key` text;--> statement-breakpoint
CREATE UNIQUE INDEX `deployments_endpoint_key_unique` ON `deployments` (`endpoint_key`);