"""Call chains recorded from real programs (lightning 2.6.6, accelerate 1.15.0, transformers 5.24.0,
deepspeed 0.19.8; 2 ranks on CPU/gloo, COLLCHECK_STACK=full), one per framework call they made.

Each: (program, op, the table function expected to name it or None, frames outermost first).
Frames are "file:line:function" joined by " > "; "~" stands for a site-packages folder, other files are the
user's program; ABBREV shortens the frameworks' folders (test_framework_calls.py expands them).
"""

ABBREV = {'~L/': 'lightning/pytorch/',
          '~F/': 'lightning/fabric/',
          '~Z/': 'deepspeed/runtime/zero/',
          '~D/': 'deepspeed/',
          '~T/': 'transformers/',
          '~A/': 'accelerate/'}

RECORDED = [
    ('pl', 'broadcast_', 'Trainer.log_dir',
     ('pl_prog.py:41:<module> > pl_prog.py:37:main > ~L/trainer/trainer.py:584:fit > '
      '~L/trainer/call.py:48:_call_and_handle_interrupt > '
      '~L/strategies/launchers/subprocess_script.py:105:launch > ~L/trainer/trainer.py:630:_fit_impl > '
      '~L/trainer/trainer.py:1034:_run > ~L/trainer/trainer.py:1169:__setup_profiler > '
      '~L/trainer/trainer.py:1331:log_dir > ~L/strategies/ddp.py:311:broadcast')),
    ('pl', 'barrier', '_call_setup_hook',
     ('pl_prog.py:41:<module> > pl_prog.py:37:main > ~L/trainer/trainer.py:584:fit > '
      '~L/trainer/call.py:48:_call_and_handle_interrupt > '
      '~L/strategies/launchers/subprocess_script.py:105:launch > ~L/trainer/trainer.py:630:_fit_impl > '
      '~L/trainer/trainer.py:1039:_run > ~L/trainer/call.py:105:_call_setup_hook > '
      '~L/strategies/ddp.py:303:barrier')),
    ('pl', 'broadcast_', 'ModelCheckpoint.setup',
     ('pl_prog.py:41:<module> > pl_prog.py:37:main > ~L/trainer/trainer.py:584:fit > '
      '~L/trainer/call.py:48:_call_and_handle_interrupt > '
      '~L/strategies/launchers/subprocess_script.py:105:launch > ~L/trainer/trainer.py:630:_fit_impl > '
      '~L/trainer/trainer.py:1039:_run > ~L/trainer/call.py:109:_call_setup_hook > '
      '~L/trainer/call.py:228:_call_callback_hooks > ~L/callbacks/model_checkpoint.py:325:setup > '
      '~L/strategies/ddp.py:311:broadcast')),
    ('pl', 'allgather_', 'DDPStrategy._setup_model',
     ('pl_prog.py:41:<module> > pl_prog.py:37:main > ~L/trainer/trainer.py:584:fit > '
      '~L/trainer/call.py:48:_call_and_handle_interrupt > '
      '~L/strategies/launchers/subprocess_script.py:105:launch > ~L/trainer/trainer.py:630:_fit_impl > '
      '~L/trainer/trainer.py:1053:_run > ~L/strategies/ddp.py:172:setup > '
      '~L/strategies/ddp.py:287:configure_ddp > ~L/strategies/ddp.py:196:_setup_model')),
    ('pl', 'barrier', '_CheckpointConnector.resume_end',
     ('pl_prog.py:41:<module> > pl_prog.py:37:main > ~L/trainer/trainer.py:584:fit > '
      '~L/trainer/call.py:48:_call_and_handle_interrupt > '
      '~L/strategies/launchers/subprocess_script.py:105:launch > ~L/trainer/trainer.py:630:_fit_impl > '
      '~L/trainer/trainer.py:1072:_run > ~L/trainer/connectors/checkpoint_connector.py:231:resume_end > '
      '~L/strategies/ddp.py:303:barrier')),
    ('pl', 'barrier', 'Trainer._run_stage',
     ('pl_prog.py:41:<module> > pl_prog.py:37:main > ~L/trainer/trainer.py:584:fit > '
      '~L/trainer/call.py:48:_call_and_handle_interrupt > '
      '~L/strategies/launchers/subprocess_script.py:105:launch > ~L/trainer/trainer.py:630:_fit_impl > '
      '~L/trainer/trainer.py:1079:_run > ~L/trainer/trainer.py:1112:_run_stage > '
      '~L/strategies/ddp.py:303:barrier')),
    ('pl', 'barrier', '_EvaluationLoop.setup_data',
     ('pl_prog.py:41:<module> > pl_prog.py:37:main > ~L/trainer/trainer.py:584:fit > '
      '~L/trainer/call.py:48:_call_and_handle_interrupt > '
      '~L/strategies/launchers/subprocess_script.py:105:launch > ~L/trainer/trainer.py:630:_fit_impl > '
      '~L/trainer/trainer.py:1079:_run > ~L/trainer/trainer.py:1121:_run_stage > '
      '~L/trainer/trainer.py:1150:_run_sanity_check > ~L/loops/utilities.py:179:_decorator > '
      '~L/loops/evaluation_loop.py:121:run > ~L/loops/evaluation_loop.py:178:setup_data > '
      '~L/strategies/ddp.py:303:barrier')),
    ('pl', 'barrier', 'has_len_all_ranks',
     ('pl_prog.py:41:<module> > pl_prog.py:37:main > ~L/trainer/trainer.py:584:fit > '
      '~L/trainer/call.py:48:_call_and_handle_interrupt > '
      '~L/strategies/launchers/subprocess_script.py:105:launch > ~L/trainer/trainer.py:630:_fit_impl > '
      '~L/trainer/trainer.py:1079:_run > ~L/trainer/trainer.py:1121:_run_stage > '
      '~L/trainer/trainer.py:1150:_run_sanity_check > ~L/loops/utilities.py:179:_decorator > '
      '~L/loops/evaluation_loop.py:121:run > ~L/loops/evaluation_loop.py:203:setup_data > '
      '~L/utilities/data.py:104:has_len_all_ranks > ~L/strategies/ddp.py:367:reduce > '
      '~F/utilities/distributed.py:178:_sync_ddp_if_available > ~F/utilities/distributed.py:213:_sync_ddp')),
    ('pl', 'barrier', '_ResultMetric.compute',
     ('pl_prog.py:41:<module> > pl_prog.py:37:main > ~L/trainer/trainer.py:584:fit > '
      '~L/trainer/call.py:48:_call_and_handle_interrupt > '
      '~L/strategies/launchers/subprocess_script.py:105:launch > ~L/trainer/trainer.py:630:_fit_impl > '
      '~L/trainer/trainer.py:1079:_run > ~L/trainer/trainer.py:1121:_run_stage > '
      '~L/trainer/trainer.py:1150:_run_sanity_check > ~L/loops/utilities.py:179:_decorator > '
      '~L/loops/evaluation_loop.py:153:run > ~L/loops/evaluation_loop.py:296:on_run_end > '
      '~L/loops/evaluation_loop.py:381:_on_evaluation_epoch_end > '
      '~L/trainer/connectors/logger_connector/logger_connector.py:205:on_epoch_end > '
      '~L/trainer/connectors/logger_connector/logger_connector.py:244:metrics > '
      '~L/trainer/connectors/logger_connector/result.py:475:metrics > '
      '~L/trainer/connectors/logger_connector/result.py:439:_get_cache > '
      '~L/trainer/connectors/logger_connector/result.py:288:wrapped_func > '
      '~L/trainer/connectors/logger_connector/result.py:248:compute > ~L/strategies/ddp.py:367:reduce > '
      '~F/utilities/distributed.py:178:_sync_ddp_if_available > ~F/utilities/distributed.py:213:_sync_ddp')),
    ('pl', 'barrier', '_FitLoop.setup_data',
     ('pl_prog.py:41:<module> > pl_prog.py:37:main > ~L/trainer/trainer.py:584:fit > '
      '~L/trainer/call.py:48:_call_and_handle_interrupt > '
      '~L/strategies/launchers/subprocess_script.py:105:launch > ~L/trainer/trainer.py:630:_fit_impl > '
      '~L/trainer/trainer.py:1079:_run > ~L/trainer/trainer.py:1123:_run_stage > ~L/loops/fit_loop.py:209:run > '
      '~L/loops/fit_loop.py:239:setup_data > ~L/strategies/ddp.py:303:barrier')),
    ('pl', 'broadcast_', '_TrainingEpochLoop._broadcast_sigterm_tensor',
     ('pl_prog.py:41:<module> > pl_prog.py:37:main > ~L/trainer/trainer.py:584:fit > '
      '~L/trainer/call.py:48:_call_and_handle_interrupt > '
      '~L/strategies/launchers/subprocess_script.py:105:launch > ~L/trainer/trainer.py:630:_fit_impl > '
      '~L/trainer/trainer.py:1079:_run > ~L/trainer/trainer.py:1123:_run_stage > ~L/loops/fit_loop.py:217:run > '
      '~L/loops/fit_loop.py:469:advance > ~L/loops/training_epoch_loop.py:153:run > '
      '~L/loops/training_epoch_loop.py:300:advance > '
      '~L/loops/training_epoch_loop.py:265:_broadcast_sigterm_tensor')),
    ('pl', 'barrier', 'LightningModule.log',
     ('pl_prog.py:41:<module> > pl_prog.py:37:main > ~L/trainer/trainer.py:584:fit > '
      '~L/trainer/call.py:48:_call_and_handle_interrupt > '
      '~L/strategies/launchers/subprocess_script.py:105:launch > ~L/trainer/trainer.py:630:_fit_impl > '
      '~L/trainer/trainer.py:1079:_run > ~L/trainer/trainer.py:1123:_run_stage > ~L/loops/fit_loop.py:217:run > '
      '~L/loops/fit_loop.py:469:advance > ~L/loops/training_epoch_loop.py:153:run > '
      '~L/loops/training_epoch_loop.py:352:advance > ~L/loops/optimization/automatic.py:192:run > '
      '~L/loops/optimization/automatic.py:270:_optimizer_step > '
      '~L/trainer/call.py:177:_call_lightning_module_hook > ~L/core/module.py:1368:optimizer_step > '
      '~L/core/optimizer.py:154:step > ~L/strategies/ddp.py:274:optimizer_step > '
      '~L/strategies/strategy.py:239:optimizer_step > ~L/plugins/precision/precision.py:123:optimizer_step > '
      '~L/plugins/precision/precision.py:109:_wrap_closure > ~L/loops/optimization/automatic.py:146:__call__ > '
      '~L/loops/optimization/automatic.py:131:closure > ~L/loops/optimization/automatic.py:319:_training_step > '
      '~L/trainer/call.py:329:_call_strategy_hook > ~L/strategies/strategy.py:390:training_step > '
      '~L/strategies/strategy.py:641:__call__ > ~L/strategies/strategy.py:634:wrapped_forward > '
      'pl_prog.py:15:training_step > ~L/core/module.py:531:log > '
      '~L/trainer/connectors/logger_connector/result.py:415:log > '
      '~L/trainer/connectors/logger_connector/result.py:421:update_metrics > '
      '~L/trainer/connectors/logger_connector/result.py:270:forward > ~torchmetrics/metric.py:549:wrapped_func > '
      '~L/trainer/connectors/logger_connector/result.py:225:update > ~L/strategies/ddp.py:367:reduce > '
      '~F/utilities/distributed.py:178:_sync_ddp_if_available > ~F/utilities/distributed.py:213:_sync_ddp')),
    ('pl', 'allreduce_', 'LightningModule.backward',
     ('pl_prog.py:41:<module> > pl_prog.py:37:main > ~L/trainer/trainer.py:584:fit > '
      '~L/trainer/call.py:48:_call_and_handle_interrupt > '
      '~L/strategies/launchers/subprocess_script.py:105:launch > ~L/trainer/trainer.py:630:_fit_impl > '
      '~L/trainer/trainer.py:1079:_run > ~L/trainer/trainer.py:1123:_run_stage > ~L/loops/fit_loop.py:217:run > '
      '~L/loops/fit_loop.py:469:advance > ~L/loops/training_epoch_loop.py:153:run > '
      '~L/loops/training_epoch_loop.py:352:advance > ~L/loops/optimization/automatic.py:192:run > '
      '~L/loops/optimization/automatic.py:270:_optimizer_step > '
      '~L/trainer/call.py:177:_call_lightning_module_hook > ~L/core/module.py:1368:optimizer_step > '
      '~L/core/optimizer.py:154:step > ~L/strategies/ddp.py:274:optimizer_step > '
      '~L/strategies/strategy.py:239:optimizer_step > ~L/plugins/precision/precision.py:123:optimizer_step > '
      '~L/plugins/precision/precision.py:109:_wrap_closure > ~L/loops/optimization/automatic.py:146:__call__ > '
      '~L/loops/optimization/automatic.py:140:closure > ~L/loops/optimization/automatic.py:241:backward_fn > '
      '~L/trainer/call.py:329:_call_strategy_hook > ~L/strategies/strategy.py:213:backward > '
      '~L/plugins/precision/precision.py:73:backward > ~L/core/module.py:1137:backward')),
    ('pl', 'broadcast_', '_ForwardRedirection.__call__',
     ('pl_prog.py:41:<module> > pl_prog.py:37:main > ~L/trainer/trainer.py:584:fit > '
      '~L/trainer/call.py:48:_call_and_handle_interrupt > '
      '~L/strategies/launchers/subprocess_script.py:105:launch > ~L/trainer/trainer.py:630:_fit_impl > '
      '~L/trainer/trainer.py:1079:_run > ~L/trainer/trainer.py:1123:_run_stage > ~L/loops/fit_loop.py:217:run > '
      '~L/loops/fit_loop.py:469:advance > ~L/loops/training_epoch_loop.py:153:run > '
      '~L/loops/training_epoch_loop.py:352:advance > ~L/loops/optimization/automatic.py:192:run > '
      '~L/loops/optimization/automatic.py:270:_optimizer_step > '
      '~L/trainer/call.py:177:_call_lightning_module_hook > ~L/core/module.py:1368:optimizer_step > '
      '~L/core/optimizer.py:154:step > ~L/strategies/ddp.py:274:optimizer_step > '
      '~L/strategies/strategy.py:239:optimizer_step > ~L/plugins/precision/precision.py:123:optimizer_step > '
      '~L/plugins/precision/precision.py:109:_wrap_closure > ~L/loops/optimization/automatic.py:146:__call__ > '
      '~L/loops/optimization/automatic.py:131:closure > ~L/loops/optimization/automatic.py:319:_training_step > '
      '~L/trainer/call.py:329:_call_strategy_hook > ~L/strategies/strategy.py:390:training_step > '
      '~L/strategies/strategy.py:641:__call__')),
    ('pl', 'allgather_', 'LightningModule.all_gather',
     ('pl_prog.py:41:<module> > pl_prog.py:37:main > ~L/trainer/trainer.py:584:fit > '
      '~L/trainer/call.py:48:_call_and_handle_interrupt > '
      '~L/strategies/launchers/subprocess_script.py:105:launch > ~L/trainer/trainer.py:630:_fit_impl > '
      '~L/trainer/trainer.py:1079:_run > ~L/trainer/trainer.py:1123:_run_stage > ~L/loops/fit_loop.py:218:run > '
      '~L/loops/fit_loop.py:483:on_advance_end > ~L/trainer/call.py:177:_call_lightning_module_hook > '
      'pl_prog.py:24:on_train_epoch_end > ~L/core/module.py:694:all_gather > '
      '~lightning_utilities/core/apply_func.py:70:apply_to_collection > ~L/strategies/parallel.py:92:all_gather > '
      '~F/utilities/distributed.py:247:_all_gather_ddp_if_available')),
    ('pl', 'barrier', 'DDPStrategy.barrier',
     ('pl_prog.py:41:<module> > pl_prog.py:37:main > ~L/trainer/trainer.py:584:fit > '
      '~L/trainer/call.py:48:_call_and_handle_interrupt > '
      '~L/strategies/launchers/subprocess_script.py:105:launch > ~L/trainer/trainer.py:630:_fit_impl > '
      '~L/trainer/trainer.py:1079:_run > ~L/trainer/trainer.py:1123:_run_stage > ~L/loops/fit_loop.py:218:run > '
      '~L/loops/fit_loop.py:483:on_advance_end > ~L/trainer/call.py:177:_call_lightning_module_hook > '
      'pl_prog.py:25:on_train_epoch_end > ~L/strategies/ddp.py:303:barrier')),
    ('pl', 'broadcast_', 'DDPStrategy.broadcast',
     ('pl_prog.py:41:<module> > pl_prog.py:37:main > ~L/trainer/trainer.py:584:fit > '
      '~L/trainer/call.py:48:_call_and_handle_interrupt > '
      '~L/strategies/launchers/subprocess_script.py:105:launch > ~L/trainer/trainer.py:630:_fit_impl > '
      '~L/trainer/trainer.py:1079:_run > ~L/trainer/trainer.py:1123:_run_stage > ~L/loops/fit_loop.py:218:run > '
      '~L/loops/fit_loop.py:483:on_advance_end > ~L/trainer/call.py:177:_call_lightning_module_hook > '
      'pl_prog.py:26:on_train_epoch_end > ~L/strategies/ddp.py:311:broadcast')),
    ('pl', 'barrier', 'ModelCheckpoint.file_exists',
     ('pl_prog.py:41:<module> > pl_prog.py:37:main > ~L/trainer/trainer.py:584:fit > '
      '~L/trainer/call.py:48:_call_and_handle_interrupt > '
      '~L/strategies/launchers/subprocess_script.py:105:launch > ~L/trainer/trainer.py:630:_fit_impl > '
      '~L/trainer/trainer.py:1079:_run > ~L/trainer/trainer.py:1123:_run_stage > ~L/loops/fit_loop.py:218:run > '
      '~L/loops/fit_loop.py:484:on_advance_end > ~L/trainer/call.py:228:_call_callback_hooks > '
      '~L/callbacks/model_checkpoint.py:493:on_train_epoch_end > '
      '~L/callbacks/model_checkpoint.py:591:_save_topk_checkpoint > '
      '~L/callbacks/model_checkpoint.py:939:_save_none_monitor_checkpoint > '
      '~L/callbacks/model_checkpoint.py:890:_get_metric_interpolated_filepath_name > '
      '~L/callbacks/model_checkpoint.py:1005:file_exists > '
      '~L/strategies/parallel.py:109:reduce_boolean_decision > ~L/strategies/ddp.py:367:reduce > '
      '~F/utilities/distributed.py:178:_sync_ddp_if_available > ~F/utilities/distributed.py:213:_sync_ddp')),
    ('pl', 'barrier', 'ModelCheckpoint._save_checkpoint',
     ('pl_prog.py:41:<module> > pl_prog.py:37:main > ~L/trainer/trainer.py:584:fit > '
      '~L/trainer/call.py:48:_call_and_handle_interrupt > '
      '~L/strategies/launchers/subprocess_script.py:105:launch > ~L/trainer/trainer.py:630:_fit_impl > '
      '~L/trainer/trainer.py:1079:_run > ~L/trainer/trainer.py:1123:_run_stage > ~L/loops/fit_loop.py:218:run > '
      '~L/loops/fit_loop.py:484:on_advance_end > ~L/trainer/call.py:228:_call_callback_hooks > '
      '~L/callbacks/model_checkpoint.py:493:on_train_epoch_end > '
      '~L/callbacks/model_checkpoint.py:591:_save_topk_checkpoint > '
      '~L/callbacks/model_checkpoint.py:942:_save_none_monitor_checkpoint > '
      '~L/callbacks/model_checkpoint.py:600:_save_checkpoint > ~L/trainer/trainer.py:1465:save_checkpoint > '
      '~L/strategies/ddp.py:303:barrier')),
    ('ptl', 'barrier', 'has_len_all_ranks',
     ('ptl_prog.py:41:<module> > ptl_prog.py:37:main > ~pytorch_lightning/trainer/trainer.py:584:fit > '
      '~pytorch_lightning/trainer/call.py:48:_call_and_handle_interrupt > '
      '~pytorch_lightning/strategies/launchers/subprocess_script.py:105:launch > '
      '~pytorch_lightning/trainer/trainer.py:630:_fit_impl > ~pytorch_lightning/trainer/trainer.py:1079:_run > '
      '~pytorch_lightning/trainer/trainer.py:1121:_run_stage > '
      '~pytorch_lightning/trainer/trainer.py:1150:_run_sanity_check > '
      '~pytorch_lightning/loops/utilities.py:179:_decorator > '
      '~pytorch_lightning/loops/evaluation_loop.py:121:run > '
      '~pytorch_lightning/loops/evaluation_loop.py:203:setup_data > '
      '~pytorch_lightning/utilities/data.py:104:has_len_all_ranks > '
      '~pytorch_lightning/strategies/ddp.py:367:reduce > '
      '~lightning_fabric/utilities/distributed.py:178:_sync_ddp_if_available > '
      '~lightning_fabric/utilities/distributed.py:213:_sync_ddp')),
    ('ptl', 'barrier', '_ResultMetric.compute',
     ('ptl_prog.py:41:<module> > ptl_prog.py:37:main > ~pytorch_lightning/trainer/trainer.py:584:fit > '
      '~pytorch_lightning/trainer/call.py:48:_call_and_handle_interrupt > '
      '~pytorch_lightning/strategies/launchers/subprocess_script.py:105:launch > '
      '~pytorch_lightning/trainer/trainer.py:630:_fit_impl > ~pytorch_lightning/trainer/trainer.py:1079:_run > '
      '~pytorch_lightning/trainer/trainer.py:1121:_run_stage > '
      '~pytorch_lightning/trainer/trainer.py:1150:_run_sanity_check > '
      '~pytorch_lightning/loops/utilities.py:179:_decorator > '
      '~pytorch_lightning/loops/evaluation_loop.py:153:run > '
      '~pytorch_lightning/loops/evaluation_loop.py:296:on_run_end > '
      '~pytorch_lightning/loops/evaluation_loop.py:381:_on_evaluation_epoch_end > '
      '~pytorch_lightning/trainer/connectors/logger_connector/logger_connector.py:205:on_epoch_end > '
      '~pytorch_lightning/trainer/connectors/logger_connector/logger_connector.py:244:metrics > '
      '~pytorch_lightning/trainer/connectors/logger_connector/result.py:475:metrics > '
      '~pytorch_lightning/trainer/connectors/logger_connector/result.py:439:_get_cache > '
      '~pytorch_lightning/trainer/connectors/logger_connector/result.py:288:wrapped_func > '
      '~pytorch_lightning/trainer/connectors/logger_connector/result.py:248:compute > '
      '~pytorch_lightning/strategies/ddp.py:367:reduce > '
      '~lightning_fabric/utilities/distributed.py:178:_sync_ddp_if_available > '
      '~lightning_fabric/utilities/distributed.py:213:_sync_ddp')),
    ('ptl', 'barrier', 'LightningModule.log',
     ('ptl_prog.py:41:<module> > ptl_prog.py:37:main > ~pytorch_lightning/trainer/trainer.py:584:fit > '
      '~pytorch_lightning/trainer/call.py:48:_call_and_handle_interrupt > '
      '~pytorch_lightning/strategies/launchers/subprocess_script.py:105:launch > '
      '~pytorch_lightning/trainer/trainer.py:630:_fit_impl > ~pytorch_lightning/trainer/trainer.py:1079:_run > '
      '~pytorch_lightning/trainer/trainer.py:1123:_run_stage > ~pytorch_lightning/loops/fit_loop.py:217:run > '
      '~pytorch_lightning/loops/fit_loop.py:469:advance > '
      '~pytorch_lightning/loops/training_epoch_loop.py:153:run > '
      '~pytorch_lightning/loops/training_epoch_loop.py:352:advance > '
      '~pytorch_lightning/loops/optimization/automatic.py:192:run > '
      '~pytorch_lightning/loops/optimization/automatic.py:270:_optimizer_step > '
      '~pytorch_lightning/trainer/call.py:177:_call_lightning_module_hook > '
      '~pytorch_lightning/core/module.py:1368:optimizer_step > ~pytorch_lightning/core/optimizer.py:154:step > '
      '~pytorch_lightning/strategies/ddp.py:274:optimizer_step > '
      '~pytorch_lightning/strategies/strategy.py:239:optimizer_step > '
      '~pytorch_lightning/plugins/precision/precision.py:123:optimizer_step > '
      '~pytorch_lightning/plugins/precision/precision.py:109:_wrap_closure > '
      '~pytorch_lightning/loops/optimization/automatic.py:146:__call__ > '
      '~pytorch_lightning/loops/optimization/automatic.py:131:closure > '
      '~pytorch_lightning/loops/optimization/automatic.py:319:_training_step > '
      '~pytorch_lightning/trainer/call.py:329:_call_strategy_hook > '
      '~pytorch_lightning/strategies/strategy.py:390:training_step > '
      '~pytorch_lightning/strategies/strategy.py:641:__call__ > '
      '~pytorch_lightning/strategies/strategy.py:634:wrapped_forward > ptl_prog.py:15:training_step > '
      '~pytorch_lightning/core/module.py:531:log > '
      '~pytorch_lightning/trainer/connectors/logger_connector/result.py:415:log > '
      '~pytorch_lightning/trainer/connectors/logger_connector/result.py:421:update_metrics > '
      '~pytorch_lightning/trainer/connectors/logger_connector/result.py:270:forward > '
      '~torchmetrics/metric.py:549:wrapped_func > '
      '~pytorch_lightning/trainer/connectors/logger_connector/result.py:225:update > '
      '~pytorch_lightning/strategies/ddp.py:367:reduce > '
      '~lightning_fabric/utilities/distributed.py:178:_sync_ddp_if_available > '
      '~lightning_fabric/utilities/distributed.py:213:_sync_ddp')),
    ('pl_es', 'broadcast_', 'Timer._check_time_remaining',
     ('pl_es_prog.py:46:<module> > pl_es_prog.py:39:main > ~L/trainer/trainer.py:584:fit > '
      '~L/trainer/call.py:48:_call_and_handle_interrupt > '
      '~L/strategies/launchers/subprocess_script.py:105:launch > ~L/trainer/trainer.py:630:_fit_impl > '
      '~L/trainer/trainer.py:1057:_run > ~L/trainer/call.py:228:_call_callback_hooks > '
      '~L/callbacks/timer.py:175:on_fit_start > ~L/callbacks/timer.py:201:_check_time_remaining > '
      '~L/strategies/ddp.py:311:broadcast')),
    ('pl_es', 'barrier', 'EarlyStopping._run_early_stopping_check',
     ('pl_es_prog.py:46:<module> > pl_es_prog.py:39:main > ~L/trainer/trainer.py:584:fit > '
      '~L/trainer/call.py:48:_call_and_handle_interrupt > '
      '~L/strategies/launchers/subprocess_script.py:105:launch > ~L/trainer/trainer.py:630:_fit_impl > '
      '~L/trainer/trainer.py:1079:_run > ~L/trainer/trainer.py:1123:_run_stage > ~L/loops/fit_loop.py:218:run > '
      '~L/loops/fit_loop.py:484:on_advance_end > ~L/trainer/call.py:228:_call_callback_hooks > '
      '~L/callbacks/early_stopping.py:217:on_train_epoch_end > '
      '~L/callbacks/early_stopping.py:238:_run_early_stopping_check > '
      '~L/strategies/parallel.py:109:reduce_boolean_decision > ~L/strategies/ddp.py:367:reduce > '
      '~F/utilities/distributed.py:178:_sync_ddp_if_available > ~F/utilities/distributed.py:213:_sync_ddp')),
    ('pl_es', 'barrier', 'ModelCheckpoint.check_monitor_top_k',
     ('pl_es_prog.py:46:<module> > pl_es_prog.py:39:main > ~L/trainer/trainer.py:584:fit > '
      '~L/trainer/call.py:48:_call_and_handle_interrupt > '
      '~L/strategies/launchers/subprocess_script.py:105:launch > ~L/trainer/trainer.py:630:_fit_impl > '
      '~L/trainer/trainer.py:1079:_run > ~L/trainer/trainer.py:1123:_run_stage > ~L/loops/fit_loop.py:218:run > '
      '~L/loops/fit_loop.py:484:on_advance_end > ~L/trainer/call.py:228:_call_callback_hooks > '
      '~L/callbacks/model_checkpoint.py:493:on_train_epoch_end > '
      '~L/callbacks/model_checkpoint.py:589:_save_topk_checkpoint > '
      '~L/callbacks/model_checkpoint.py:930:_save_monitor_checkpoint > '
      '~L/callbacks/model_checkpoint.py:750:check_monitor_top_k > '
      '~L/strategies/parallel.py:109:reduce_boolean_decision > ~L/strategies/ddp.py:367:reduce > '
      '~F/utilities/distributed.py:178:_sync_ddp_if_available > ~F/utilities/distributed.py:213:_sync_ddp')),
    ('pl_es', 'broadcast_', 'DDPStrategy.setup',
     ('pl_es_prog.py:46:<module> > pl_es_prog.py:40:main > ~L/trainer/trainer.py:702:validate > '
      '~L/trainer/call.py:48:_call_and_handle_interrupt > '
      '~L/strategies/launchers/subprocess_script.py:105:launch > ~L/trainer/trainer.py:745:_validate_impl > '
      '~L/trainer/trainer.py:1053:_run > ~L/strategies/ddp.py:178:setup > '
      '~L/overrides/distributed.py:170:_sync_module_states')),
    ('pl_es', 'barrier', '_PredictionLoop.setup_data',
     ('pl_es_prog.py:46:<module> > pl_es_prog.py:42:main > ~L/trainer/trainer.py:941:predict > '
      '~L/trainer/call.py:48:_call_and_handle_interrupt > '
      '~L/strategies/launchers/subprocess_script.py:105:launch > ~L/trainer/trainer.py:990:_predict_impl > '
      '~L/trainer/trainer.py:1079:_run > ~L/trainer/trainer.py:1118:_run_stage > '
      '~L/loops/utilities.py:179:_decorator > ~L/loops/prediction_loop.py:105:run > '
      '~L/loops/prediction_loop.py:141:setup_data > ~L/strategies/ddp.py:303:barrier')),
    ('fabric', 'allgather_', 'Fabric.setup',
     ('fabric_prog.py:30:<module> > fabric_prog.py:11:main > ~F/fabric.py:282:setup > '
      '~F/strategies/strategy.py:159:setup_module_and_optimizers > ~F/strategies/ddp.py:130:setup_module')),
    ('fabric', 'allreduce_', 'Fabric.backward',
     ('fabric_prog.py:30:<module> > fabric_prog.py:15:main > ~F/fabric.py:523:backward > '
      '~F/strategies/strategy.py:192:backward > ~F/plugins/precision/precision.py:107:backward')),
    ('fabric', 'broadcast_', '_FabricModule.forward',
     ('fabric_prog.py:30:<module> > fabric_prog.py:14:main > ~F/wrappers.py:136:forward')),
    ('fabric', 'barrier', 'Fabric.barrier',
     ('fabric_prog.py:30:<module> > fabric_prog.py:18:main > ~F/fabric.py:638:barrier > '
      '~F/strategies/ddp.py:165:barrier')),
    ('fabric', 'broadcast_', 'Fabric.broadcast',
     ('fabric_prog.py:30:<module> > fabric_prog.py:19:main > ~F/fabric.py:655:broadcast > '
      '~F/strategies/ddp.py:181:broadcast')),
    ('fabric', 'allgather_', 'Fabric.all_gather',
     ('fabric_prog.py:30:<module> > fabric_prog.py:20:main > ~F/fabric.py:679:all_gather > '
      '~lightning_utilities/core/apply_func.py:70:apply_to_collection > ~F/strategies/parallel.py:86:all_gather > '
      '~F/utilities/distributed.py:247:_all_gather_ddp_if_available')),
    ('fabric', 'barrier', 'Fabric.all_reduce',
     ('fabric_prog.py:30:<module> > fabric_prog.py:21:main > ~F/fabric.py:708:all_reduce > '
      '~lightning_utilities/core/apply_func.py:70:apply_to_collection > ~F/strategies/ddp.py:153:all_reduce > '
      '~F/utilities/distributed.py:178:_sync_ddp_if_available > ~F/utilities/distributed.py:213:_sync_ddp')),
    ('fabric', 'monitored_barrier_', 'Fabric.rank_zero_first',
     ('fabric_prog.py:30:<module> > fabric_prog.py:22:main > ~F/fabric.py:731:rank_zero_first > '
      '~F/utilities/distributed.py:418:__call__')),
    ('fabric', 'barrier', 'Fabric.save',
     ('fabric_prog.py:30:<module> > fabric_prog.py:25:main > ~F/fabric.py:867:save > ~F/fabric.py:638:barrier > '
      '~F/strategies/ddp.py:165:barrier')),
    ('fabric', 'barrier', 'Fabric.load',
     ('fabric_prog.py:30:<module> > fabric_prog.py:26:main > ~F/fabric.py:915:load > ~F/fabric.py:638:barrier > '
      '~F/strategies/ddp.py:165:barrier')),
    ('acc', 'allgather_', 'Accelerator.prepare_model',
     ('acc_prog.py:57:<module> > acc_prog.py:26:main > ~A/accelerator.py:1558:prepare > '
      '~A/accelerator.py:1559:<genexpr> > ~A/accelerator.py:1404:_prepare_one > '
      '~A/accelerator.py:2060:prepare_model')),
    ('acc', 'broadcast_', 'DataLoaderShard.__iter__',
     ('acc_prog.py:57:<module> > acc_prog.py:29:main > ~A/data_loader.py:579:__iter__ > '
      '~A/utils/random.py:165:synchronize_rng_states > ~A/utils/random.py:136:synchronize_rng_state')),
    ('acc', 'allreduce_', 'Accelerator.backward',
     ('acc_prog.py:57:<module> > acc_prog.py:31:main > ~A/accelerator.py:2861:backward')),
    ('acc', 'broadcast_', None,
     ('acc_prog.py:57:<module> > acc_prog.py:30:main')),
    ('acc', 'allreduce_', 'Accelerator.reduce',
     ('acc_prog.py:57:<module> > acc_prog.py:34:main > ~A/accelerator.py:3217:reduce > '
      '~A/utils/operations.py:378:wrapper > ~A/utils/operations.py:884:reduce > '
      '~A/utils/operations.py:127:recursively_apply > ~A/utils/operations.py:879:_reduce_across_processes')),
    ('acc', 'allgather_', 'Accelerator.gather_for_metrics',
     ('acc_prog.py:57:<module> > acc_prog.py:35:main > acc_prog.py:14:evaluate > '
      '~A/accelerator.py:3151:gather_for_metrics > ~A/accelerator.py:3107:gather > '
      '~A/utils/operations.py:378:wrapper > ~A/utils/operations.py:439:gather > '
      '~A/utils/operations.py:358:_gpu_gather > ~A/utils/operations.py:127:recursively_apply > '
      '~A/utils/operations.py:355:_gpu_gather_one')),
    ('acc', 'allgather_', 'Accelerator.pad_across_processes',
     ('acc_prog.py:57:<module> > acc_prog.py:36:main > ~A/accelerator.py:3252:pad_across_processes > '
      '~A/utils/operations.py:414:wrapper > ~A/utils/operations.py:800:pad_across_processes > '
      '~A/utils/operations.py:127:recursively_apply > ~A/utils/operations.py:781:_pad_across_processes > '
      '~A/utils/operations.py:378:wrapper > ~A/utils/operations.py:439:gather > '
      '~A/utils/operations.py:358:_gpu_gather > ~A/utils/operations.py:127:recursively_apply > '
      '~A/utils/operations.py:355:_gpu_gather_one')),
    ('acc', 'allgather_', 'Accelerator.gather',
     ('acc_prog.py:57:<module> > acc_prog.py:37:main > ~A/accelerator.py:3107:gather > '
      '~A/utils/operations.py:378:wrapper > ~A/utils/operations.py:439:gather > '
      '~A/utils/operations.py:358:_gpu_gather > ~A/utils/operations.py:127:recursively_apply > '
      '~A/utils/operations.py:355:_gpu_gather_one')),
    ('acc', 'broadcast_', 'broadcast',
     ('acc_prog.py:57:<module> > acc_prog.py:38:main > ~A/utils/operations.py:378:wrapper > '
      '~A/utils/operations.py:617:broadcast > ~A/utils/operations.py:531:_gpu_broadcast > '
      '~A/utils/operations.py:127:recursively_apply > ~A/utils/operations.py:528:_gpu_broadcast_one')),
    ('acc', 'allgather_', 'gather_object',
     ('acc_prog.py:57:<module> > acc_prog.py:39:main > ~A/utils/operations.py:521:gather_object > '
      '~A/utils/operations.py:500:_gpu_gather_object')),
    ('acc', 'allreduce_', 'Accelerator.check_trigger',
     ('acc_prog.py:57:<module> > acc_prog.py:42:main > ~A/accelerator.py:2916:check_trigger > '
      '~A/accelerator.py:3217:reduce > ~A/utils/operations.py:378:wrapper > ~A/utils/operations.py:884:reduce > '
      '~A/utils/operations.py:127:recursively_apply > ~A/utils/operations.py:879:_reduce_across_processes')),
    ('acc', 'barrier', 'Accelerator.wait_for_everyone',
     ('acc_prog.py:57:<module> > acc_prog.py:44:main > ~A/accelerator.py:3310:wait_for_everyone > '
      '~A/utils/other.py:372:wait_for_everyone > ~A/state.py:412:wait_for_everyone')),
    ('acc', 'broadcast_', 'DataLoaderDispatcher._fetch_batches',
     ('acc_prog.py:57:<module> > acc_prog.py:51:main > ~A/data_loader.py:886:__iter__ > '
      '~A/data_loader.py:859:_fetch_batches > ~A/utils/operations.py:695:broadcast_object_list')),
    ('acc', 'broadcast_', 'DataLoaderDispatcher.__iter__',
     ('acc_prog.py:57:<module> > acc_prog.py:51:main > ~A/data_loader.py:896:__iter__ > '
      '~A/utils/operations.py:378:wrapper > ~A/utils/operations.py:617:broadcast > '
      '~A/utils/operations.py:531:_gpu_broadcast > ~A/utils/operations.py:108:recursively_apply > '
      '~A/utils/operations.py:82:honor_type > ~A/utils/operations.py:111:<genexpr> > '
      '~A/utils/operations.py:127:recursively_apply > ~A/utils/operations.py:528:_gpu_broadcast_one')),
    ('hf', 'allreduce_', 'Trainer.training_step',
     ('hf_prog.py:50:<module> > hf_prog.py:43:main > ~T/trainer.py:1576:train > '
      '~T/trainer.py:1660:_inner_training_loop > ~T/trainer.py:1917:_run_epoch > '
      '~T/trainer.py:2126:training_step > ~A/accelerator.py:2861:backward')),
    ('hf', 'allgather_', 'Trainer._maybe_log_save_evaluate',
     ('hf_prog.py:50:<module> > hf_prog.py:43:main > ~T/trainer.py:1576:train > '
      '~T/trainer.py:1660:_inner_training_loop > ~T/trainer.py:1958:_run_epoch > '
      '~T/trainer.py:2257:_maybe_log_save_evaluate > ~T/trainer_pt_utils.py:233:nested_gather > '
      '~T/trainer_pt_utils.py:207:distributed_concat')),
    ('hf', 'allgather_', 'Trainer.evaluation_loop',
     ('hf_prog.py:50:<module> > hf_prog.py:43:main > ~T/trainer.py:1576:train > '
      '~T/trainer.py:1660:_inner_training_loop > ~T/trainer.py:1958:_run_epoch > '
      '~T/trainer.py:2278:_maybe_log_save_evaluate > ~T/trainer.py:3310:_evaluate > ~T/trainer.py:2871:evaluate > '
      '~T/trainer.py:3007:evaluation_loop > ~A/accelerator.py:3151:gather_for_metrics > '
      '~A/accelerator.py:3107:gather > ~A/utils/operations.py:378:wrapper > ~A/utils/operations.py:439:gather > '
      '~A/utils/operations.py:358:_gpu_gather > ~A/utils/operations.py:127:recursively_apply > '
      '~A/utils/operations.py:355:_gpu_gather_one')),
    ('hf', 'allgather_', 'Trainer._save_checkpoint',
     ('hf_prog.py:50:<module> > hf_prog.py:43:main > ~T/trainer.py:1576:train > '
      '~T/trainer.py:1660:_inner_training_loop > ~T/trainer.py:1958:_run_epoch > '
      '~T/trainer.py:2285:_maybe_log_save_evaluate > ~T/trainer.py:3373:_save_checkpoint > '
      '~T/trainer.py:4217:store_flos > ~T/trainer_pt_utils.py:290:distributed_broadcast_scalars')),
    ('hf', 'allgather_', 'Trainer._finalize_training',
     ('hf_prog.py:50:<module> > hf_prog.py:43:main > ~T/trainer.py:1576:train > '
      '~T/trainer.py:1676:_inner_training_loop > ~T/trainer.py:2017:_finalize_training > '
      '~T/trainer.py:4217:store_flos > ~T/trainer_pt_utils.py:290:distributed_broadcast_scalars')),
    ('hf2', 'barrier', 'TrainingArguments.main_process_first',
     ('hf2_prog.py:37:<module> > hf2_prog.py:31:main > ~T/training_args.py:2150:main_process_first')),
    ('hf2', 'allgather_', 'Trainer._track_num_input_tokens',
     ('hf2_prog.py:37:<module> > hf2_prog.py:33:main > ~T/trainer.py:1576:train > '
      '~T/trainer.py:1660:_inner_training_loop > ~T/trainer.py:1934:_run_epoch > '
      '~T/trainer.py:2748:_track_num_input_tokens > ~A/accelerator.py:3107:gather > '
      '~A/utils/operations.py:378:wrapper > ~A/utils/operations.py:439:gather > '
      '~A/utils/operations.py:358:_gpu_gather > ~A/utils/operations.py:127:recursively_apply > '
      '~A/utils/operations.py:355:_gpu_gather_one')),
    ('ds0', 'broadcast_', 'DeepSpeedEngine._broadcast_model',
     ('ds_prog.py:25:<module> > ds_prog.py:14:main > ~D/__init__.py:569:initialize > '
      '~D/runtime/engine.py:621:__init__ > ~D/runtime/engine.py:2195:_configure_distributed_model > '
      '~D/runtime/engine.py:2059:_broadcast_model > ~D/comm/comm.py:129:log_wrapper > '
      '~D/comm/comm.py:243:broadcast > ~D/comm/torch.py:173:wrapper > ~D/comm/torch.py:351:broadcast')),
    ('ds0', 'allreduce_', 'DeepSpeedEngine.allreduce_gradients',
     ('ds_prog.py:25:<module> > ds_prog.py:18:main > ~D/utils/nvtx.py:33:wrapped_fn > '
      '~D/runtime/engine.py:3431:backward > ~D/runtime/engine.py:3165:_backward_epilogue > '
      '~D/utils/nvtx.py:33:wrapped_fn > ~D/runtime/engine.py:3095:allreduce_gradients > '
      '~D/runtime/engine.py:3932:buffered_allreduce_fallback > '
      '~D/runtime/engine.py:3893:_reduce_non_expert_gradients > ~D/runtime/engine.py:3839:allreduce_no_retain > '
      '~D/runtime/engine.py:3824:allreduce_and_copy > ~D/runtime/engine.py:3811:allreduce_bucket > '
      '~D/comm/comm.py:129:log_wrapper > ~D/comm/comm.py:710:all_reduce > ~D/comm/torch.py:173:wrapper > '
      '~D/comm/torch.py:290:all_reduce')),
    ('ds0', 'allreduce_', 'clip_grad_norm_',
     ('ds_prog.py:25:<module> > ds_prog.py:19:main > ~D/runtime/engine.py:3615:step > '
      '~D/runtime/engine.py:3511:_take_model_step > ~D/runtime/engine.py:3503:clip_fp32_gradients > '
      '~D/runtime/utils.py:418:clip_grad_norm_ > ~D/comm/comm.py:129:log_wrapper > '
      '~D/comm/comm.py:710:all_reduce > ~D/comm/torch.py:173:wrapper > ~D/comm/torch.py:290:all_reduce')),
    ('ds0', 'barrier', 'DeepSpeedEngine.save_checkpoint',
     ('ds_prog.py:25:<module> > ds_prog.py:20:main > ~D/runtime/engine.py:4900:save_checkpoint > '
      '~D/comm/comm.py:129:log_wrapper > ~D/comm/comm.py:477:barrier > ~D/comm/torch.py:519:barrier')),
    ('ds2', 'allreduce_', 'DeepSpeedZeroOptimizer.reduce_ipg_grads',
     ('ds_prog.py:25:<module> > ds_prog.py:18:main > ~D/utils/nvtx.py:33:wrapped_fn > '
      '~D/runtime/engine.py:3431:backward > ~D/runtime/engine.py:3165:_backward_epilogue > '
      '~D/utils/nvtx.py:33:wrapped_fn > ~D/runtime/engine.py:3086:allreduce_gradients > '
      '~Z/stage_1_and_2.py:1212:overlapping_partition_gradients_reduce_epilogue > '
      '~Z/stage_1_and_2.py:1018:independent_gradient_partition_epilogue > '
      '~Z/stage_1_and_2.py:2229:reduce_ipg_grads > ~Z/stage_1_and_2.py:1708:average_tensor > '
      '~Z/stage_1_and_2.py:1582:allreduce_and_scatter > '
      '~Z/stage_1_and_2.py:1525:allreduce_and_copy_with_multiple_ranks > '
      '~Z/stage_1_and_2.py:2384:allreduce_bucket > ~D/comm/comm.py:129:log_wrapper > '
      '~D/comm/comm.py:710:all_reduce > ~D/comm/torch.py:173:wrapper > ~D/comm/torch.py:290:all_reduce')),
    ('ds2', 'allreduce_', 'DeepSpeedZeroOptimizer.get_grad_norm_direct',
     ('ds_prog.py:25:<module> > ds_prog.py:19:main > ~D/runtime/engine.py:3615:step > '
      '~D/runtime/engine.py:3516:_take_model_step > ~Z/stage_1_and_2.py:3039:step > '
      '~Z/stage_1_and_2.py:2951:scaled_global_norm > ~Z/stage_1_and_2.py:2693:get_grad_norm_direct > '
      '~D/comm/comm.py:129:log_wrapper > ~D/comm/comm.py:710:all_reduce > ~D/comm/torch.py:173:wrapper > '
      '~D/comm/torch.py:290:all_reduce')),
    ('ds2', '_allgather_base_', 'all_gather_dp_groups',
     ('ds_prog.py:25:<module> > ds_prog.py:19:main > ~D/runtime/engine.py:3615:step > '
      '~D/runtime/engine.py:3516:_take_model_step > ~Z/stage_1_and_2.py:3155:step > '
      '~D/runtime/utils.py:1022:all_gather_dp_groups > '
      '~D/runtime/utils.py:1016:all_gather_into_tensor_dp_groups > ~D/comm/comm.py:129:log_wrapper > '
      '~D/comm/comm.py:342:all_gather_into_tensor > ~D/comm/torch.py:173:wrapper > '
      '~D/comm/torch.py:380:all_gather_into_tensor')),
    ('ds3', 'broadcast_', 'DeepSpeedZeroOptimizer_Stage3.__init__',
     ('ds_prog.py:25:<module> > ds_prog.py:14:main > ~D/__init__.py:569:initialize > '
      '~D/runtime/engine.py:682:__init__ > ~D/runtime/engine.py:2359:_configure_optimizer > '
      '~D/runtime/engine.py:2751:_configure_zero_optimizer > ~Z/stage3.py:275:__init__ > '
      '~Z/stage3.py:624:initialize_ds_offload > ~Z/parameter_offload.py:180:__init__ > '
      '~Z/parameter_offload.py:270:_convert_to_zero_parameters > ~Z/partition_parameters.py:1181:__init__ > '
      '~Z/partition_parameters.py:1215:_convert_to_zero_parameters > '
      '~Z/partition_parameters.py:1204:_zero_init_param > ~D/comm/comm.py:129:log_wrapper > '
      '~D/comm/comm.py:243:broadcast > ~D/comm/torch.py:173:wrapper > ~D/comm/torch.py:351:broadcast')),
    ('ds3', 'broadcast_', 'PartitionedParameterCoordinator.reset_step',
     ('ds_prog.py:25:<module> > ds_prog.py:17:main > ~D/utils/nvtx.py:33:wrapped_fn > '
      '~D/runtime/engine.py:3007:forward > ~D/utils/nvtx.py:33:wrapped_fn > '
      '~Z/parameter_offload.py:306:_start_of_forward_hook > ~Z/partitioned_param_coordinator.py:260:reset_step > '
      '~D/utils/nvtx.py:33:wrapped_fn > ~Z/utils.py:122:assert_ints_same_as_other_ranks > '
      '~D/utils/nvtx.py:33:wrapped_fn > ~Z/utils.py:89:assert_lst_len_same_as_other_ranks > '
      '~D/comm/comm.py:129:log_wrapper > ~D/comm/comm.py:243:broadcast > ~D/comm/torch.py:173:wrapper > '
      '~D/comm/torch.py:351:broadcast')),
    ('ds3', '_allgather_base_', 'PartitionedParameterCoordinator.fetch_sub_module',
     ('ds_prog.py:25:<module> > ds_prog.py:17:main > ~D/utils/nvtx.py:33:wrapped_fn > '
      '~D/runtime/engine.py:3007:forward > ~Z/parameter_offload.py:360:_pre_forward_module_hook > '
      '~Z/parameter_offload.py:543:pre_sub_module_forward_function > ~D/utils/nvtx.py:33:wrapped_fn > '
      '~Z/partitioned_param_coordinator.py:344:fetch_sub_module > '
      '~Z/partitioned_param_coordinator.py:381:_fetch_sub_module_impl > ~D/utils/nvtx.py:33:wrapped_fn > '
      '~Z/partitioned_param_coordinator.py:580:__all_gather_params > '
      '~Z/partitioned_param_coordinator.py:609:__all_gather_params_ > ~D/utils/nvtx.py:33:wrapped_fn > '
      '~Z/partition_parameters.py:1601:all_gather_coalesced > '
      '~Z/partition_parameters.py:1475:_all_gather_coalesced > '
      '~Z/partition_parameters.py:1362:_all_gather_dtype > ~Z/partition_parameters.py:123:_dist_allgather_fn > '
      '~D/utils/nvtx.py:33:wrapped_fn > ~D/comm/comm.py:357:allgather_fn > ~D/comm/comm.py:129:log_wrapper > '
      '~D/comm/comm.py:342:all_gather_into_tensor > ~D/comm/torch.py:173:wrapper > '
      '~D/comm/torch.py:380:all_gather_into_tensor')),
    ('ds3', '_reduce_scatter_base_', 'DeepSpeedZeroOptimizer_Stage3.__reduce_and_partition_ipg_grads',
     ('ds_prog.py:25:<module> > ds_prog.py:18:main > ~D/utils/nvtx.py:33:wrapped_fn > '
      '~D/runtime/engine.py:3431:backward > ~D/runtime/engine.py:3165:_backward_epilogue > '
      '~D/utils/nvtx.py:33:wrapped_fn > ~D/runtime/engine.py:3086:allreduce_gradients > '
      '~Z/stage3.py:1485:overlapping_partition_gradients_reduce_epilogue > ~D/utils/nvtx.py:33:wrapped_fn > '
      '~Z/stage3.py:1410:independent_gradient_partition_epilogue > ~D/utils/nvtx.py:33:wrapped_fn > '
      '~Z/stage3.py:1678:__reduce_and_partition_ipg_grads > ~D/utils/nvtx.py:33:wrapped_fn > '
      '~Z/stage3.py:1931:__avg_scatter_grads > ~D/utils/nvtx.py:33:wrapped_fn > '
      '~D/runtime/comm/coalesced_collectives.py:128:reduce_scatter_coalesced > '
      '~D/runtime/comm/coalesced_collectives.py:23:_torch_reduce_scatter_fn > ~D/utils/nvtx.py:33:wrapped_fn > '
      '~D/comm/comm.py:294:reduce_scatter_fn > ~D/comm/comm.py:129:log_wrapper > '
      '~D/comm/comm.py:326:reduce_scatter_tensor > ~D/comm/torch.py:173:wrapper > '
      '~D/comm/torch.py:437:reduce_scatter_tensor')),
    ('ds3', 'allreduce_', 'DeepSpeedZeroOptimizer_Stage3.get_grad_norm_direct',
     ('ds_prog.py:25:<module> > ds_prog.py:19:main > ~D/runtime/engine.py:3615:step > '
      '~D/runtime/engine.py:3516:_take_model_step > ~D/utils/nvtx.py:33:wrapped_fn > ~Z/stage3.py:2886:step > '
      '~D/utils/nvtx.py:33:wrapped_fn > ~Z/stage3.py:2579:_get_norm_groups > ~D/utils/nvtx.py:33:wrapped_fn > '
      '~Z/stage3.py:2469:get_grad_norm_direct > ~D/comm/comm.py:129:log_wrapper > '
      '~D/comm/comm.py:710:all_reduce > ~D/comm/torch.py:173:wrapper > ~D/comm/torch.py:290:all_reduce')),
    ('ds3', '_allgather_base_', 'DeepSpeedZeroOptimizer_Stage3._post_step',
     ('ds_prog.py:25:<module> > ds_prog.py:19:main > ~D/runtime/engine.py:3615:step > '
      '~D/runtime/engine.py:3516:_take_model_step > ~D/utils/nvtx.py:33:wrapped_fn > ~Z/stage3.py:2931:step > '
      '~D/utils/nvtx.py:33:wrapped_fn > ~Z/stage3.py:2841:_post_step > '
      '~Z/partition_parameters.py:1327:all_gather > ~D/utils/nvtx.py:33:wrapped_fn > '
      '~Z/partition_parameters.py:1757:_all_gather > '
      '~Z/partition_parameters.py:2073:_allgather_params_coalesced > ~D/comm/comm.py:129:log_wrapper > '
      '~D/comm/comm.py:342:all_gather_into_tensor > ~D/comm/torch.py:173:wrapper > '
      '~D/comm/torch.py:380:all_gather_into_tensor')),
    ('ds3', '_allgather_base_', 'DeepSpeedEngine.load_checkpoint',
     ('ds_prog.py:25:<module> > ds_prog.py:21:main > ~D/runtime/engine.py:4485:load_checkpoint > '
      '~Z/stage3.py:3850:checkpoint_event_epilogue > ~Z/partition_parameters.py:1327:all_gather > '
      '~D/utils/nvtx.py:33:wrapped_fn > ~Z/partition_parameters.py:1757:_all_gather > '
      '~Z/partition_parameters.py:2073:_allgather_params_coalesced > ~D/comm/comm.py:129:log_wrapper > '
      '~D/comm/comm.py:342:all_gather_into_tensor > ~D/comm/torch.py:173:wrapper > '
      '~D/comm/torch.py:380:all_gather_into_tensor')),
]
