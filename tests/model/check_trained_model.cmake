# Runs ropex-study on the committed trained model with small settings and fails unless every
# output file exists and passkey retrieval at the training length (factor 1) stays >= MIN_ACCURACY:
# the model must work at its training length before any extension measured on it means anything.
#   cmake -DSTUDY=ropex-study -DMODEL=dir -DTEXT=file -DOUT=dir -DMIN_ACCURACY=0.95 -P check_trained_model.cmake
foreach(var STUDY MODEL TEXT OUT MIN_ACCURACY)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "check_trained_model: -D${var}=... is required")
  endif()
endforeach()
file(REMOVE_RECURSE ${OUT})
execute_process(
  COMMAND ${STUDY} --model ${MODEL} --text ${TEXT} --policies plain,yarn --factors 1,4 --depths 0,50,100
          --passkey-trials 20 --needle " @{key}. " --question " @" --out ${OUT}
  RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "ropex-study failed (${status})")
endif()
foreach(name model-perplexity.csv model-perplexity.svg model-entropy.csv model-entropy.svg model-js.csv
             model-js.svg model-passkey.csv model-passkey-plain.svg model-passkey-yarn.svg)
  if(NOT EXISTS ${OUT}/${name})
    message(FATAL_ERROR "ropex-study wrote no ${name}")
  endif()
endforeach()
# model-passkey.csv: policy,length,depth_percent,accuracy; factor 1 is the smallest length.
file(STRINGS ${OUT}/model-passkey.csv rows)
list(REMOVE_AT rows 0)
set(shortest 0)
foreach(row IN LISTS rows)
  string(REPLACE "," ";" f "${row}")
  list(GET f 1 length)
  if(shortest EQUAL 0 OR length LESS shortest)
    set(shortest ${length})
  endif()
endforeach()
set(cells 0)
foreach(row IN LISTS rows)
  string(REPLACE "," ";" f "${row}")
  list(GET f 1 length)
  list(GET f 3 accuracy)
  if(length EQUAL shortest)
    math(EXPR cells "${cells} + 1")
    # CMake compares decimals with LESS as floating point ("nan" fails the check below too).
    if(NOT accuracy GREATER_EQUAL MIN_ACCURACY)
      message(FATAL_ERROR "passkey accuracy ${accuracy} < ${MIN_ACCURACY} at the training length (${row})")
    endif()
  endif()
endforeach()
if(cells EQUAL 0)
  message(FATAL_ERROR "model-passkey.csv has no rows at the training length")
endif()
message(STATUS "passkey at the training length (${shortest} tokens): ${cells} cells, all >= ${MIN_ACCURACY}")
