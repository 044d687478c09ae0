"""rewardsmith: rewards for RL post-training of language models."""
